import packageJson from '../package.json' with { type: 'json' };

/** The release this process runs: package.json's version, as the bundle was built. */
export const VERSION: string = packageJson.version;
