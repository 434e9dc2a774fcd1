// check-server.mjs DIR [NAME...] — fails unless every server scenario that
// left results in DIR (the conformance runner's -o directory) recorded at
// least one check, at least one SUCCESS, and no FAILURE or WARNING. The
// runner's own verdict misses the first two: a scenario that recorded no
// checks, or only INFO and SKIPPED ones, "passes" without having tested
// anything.
//
// NAME... are the scenarios the suite itself does not exercise yet (its
// run() reports only SKIPPED or INFO, whatever the server does); they are
// reported, and pass only while they still record no SUCCESS, FAILURE or
// WARNING — once the suite starts testing them they are held to the rule
// above (remove them from the list then).
import { readdirSync, readFileSync, statSync } from "fs";
import { join } from "path";

const [dir, ...unexercised] = process.argv.slice(2);
const allowed = new Set(unexercised);
let bad = 0;
const totals = { SUCCESS: 0, FAILURE: 0, WARNING: 0 };
const runs = readdirSync(dir)
  .filter((d) => statSync(join(dir, d)).isDirectory())
  .sort();
if (runs.length === 0) {
  console.error(`${dir}: no scenario results`);
  process.exit(1);
}
for (const run of runs) {
  const scenario = run.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT.*$/, "");
  const checks = JSON.parse(readFileSync(join(dir, run, "checks.json"), "utf8"));
  const count = (s) => checks.filter((c) => c.status === s).length;
  const ok = count("SUCCESS"), failed = count("FAILURE"), warned = count("WARNING");
  totals.SUCCESS += ok;
  totals.FAILURE += failed;
  totals.WARNING += warned;
  let verdict = ok > 0 && failed === 0 && warned === 0 ? "ok" : "FAILED";
  if (allowed.has(scenario) && ok === 0 && failed === 0 && warned === 0) {
    verdict = "unexercised";
  }
  if (verdict === "FAILED" || verdict === "unexercised" || process.env.VERBOSE) {
    const other = checks.length - ok - failed - warned;
    console.log(`${verdict.padEnd(11)} ${scenario}: ${ok} passed, ${failed} failed, ${warned} warnings, ${other} info/skipped`);
  }
  if (verdict === "FAILED") {
    if (checks.length === 0) console.error("  no checks recorded");
    for (const c of checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING")) {
      console.error(`  ${c.status} ${c.id}: ${c.errorMessage ?? c.description}`);
    }
    bad++;
  }
}
console.log(`${dir}: ${runs.length} scenarios, ${totals.SUCCESS} passed, ${totals.FAILURE} failed, ${totals.WARNING} warnings; ${bad} scenario(s) not passed`);
process.exit(bad === 0 ? 0 : 1);
