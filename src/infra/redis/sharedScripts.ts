import { defineScript } from './scripts.ts';

/** Sets fields of a campaign's meta hash only while it exists (lua/hsetIfExists.lua). */
export const hsetIfExists = defineScript('hsetIfExists', ['hash'], { set: () => ({}), missing: () => ({}) });
