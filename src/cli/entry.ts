// `tgs` from source (tests and development run it with `node --import tsx src/cli/entry.ts <command>`).
import { main } from './main.js';

await main(process.argv.slice(2));
