// check.mjs DIR SCENARIO... — fails unless each named scenario left results
// in DIR (the conformance runner's -o directory) with at least one check,
// at least one SUCCESS, and no FAILURE or WARNING. The runner's own exit
// status misses two cases this catches: a scenario that recorded no checks
// passes, and a client that crashed is not a failure by itself.
import { readdirSync, readFileSync } from "fs";
import { basename, dirname, join } from "path";

const [dir, ...scenarios] = process.argv.slice(2);
let bad = 0;
for (const scenario of scenarios) {
  // Scenarios with a group ("auth/…") have their results in DIR/<group>/.
  const where = join(dir, dirname(scenario));
  const runs = readdirSync(where).filter((d) => d.startsWith(basename(scenario) + "-2"));
  if (runs.length !== 1) {
    console.error(`${scenario}: expected one result directory, found ${runs.length}`);
    bad++;
    continue;
  }
  const checks = JSON.parse(readFileSync(join(where, runs[0], "checks.json"), "utf8"));
  const count = (s) => checks.filter((c) => c.status === s).length;
  const ok = count("SUCCESS"), failed = count("FAILURE"), warned = count("WARNING");
  const verdict = ok > 0 && failed === 0 && warned === 0 ? "ok" : "FAILED";
  console.log(`${verdict.padEnd(6)} ${scenario}: ${ok} passed, ${failed} failed, ${warned} warnings`);
  if (verdict !== "ok") {
    for (const c of checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING")) {
      console.error(`  ${c.status} ${c.id}: ${c.errorMessage ?? c.description}`);
    }
    bad++;
  }
}
process.exit(bad === 0 ? 0 : 1);
