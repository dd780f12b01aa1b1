// Preloaded (node --import, through NODE_OPTIONS) into a server process: its Date.now()
// runs CLOCK_LAG_MS behind the machine's clock, and so behind Redis's, as an app host's
// clock may. Only Date.now: replacing Date would break `instanceof Date` in libraries.
const lagMs = Number(process.env.CLOCK_LAG_MS);
const machineNow = Date.now;
Date.now = () => machineNow() - lagMs;
