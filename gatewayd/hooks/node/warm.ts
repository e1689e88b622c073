// Imported once by a fresh worker that will load TypeScript hooks: it initialises Node's type
// stripper before any hook is loaded, so a reload does not pay for that (~300 ms) on the clock.
const ready: boolean = true;
export default ready;
