// What the page holds about workspaces while it runs, keyed by workspace name. The rows, cards
// and streams modules read and write it; sign-out clears it (app.js).

export const page = {
  catalogue: [], // the entries the user may launch
  clusters: [], // {name, reachable, error}: where a launch may go, the default first
  showAll: false, // an admin's "All users"
  refreshSeq: 0, // the newest list request: older answers are dropped
  launchSeq: 0, // launches accepted, for the browser tests to wait on
};
export const rows = new Map(); // name -> the row's record (table.js)
export const streams = new Map(); // name -> the live progress stream followed (progress.js)
export const cards = new Map(); // name -> its ProgressCard
export const ended = new Map(); // name -> {status, at}: how its last stream ended
export const gone = new Set(); // deleted here, hidden until the list stops showing them
export const revealed = new Set(); // "name/container" of tokens shown in clear
