// check.mjs DIR SCENARIO... — fails unless each named scenario left results
// in DIR (the conformance runner's -o directory) with at least one check,
// at least one SUCCESS, and no FAILURE or WARNING, and unless every
// scenario that left results is named (a scenario a new suite version
// adds, or renames, must be added to the list, not go unchecked). The
// runner's own exit status misses two cases this catches: a scenario that
// recorded no checks passes, and a client that crashed is not a failure by
// itself. It ends with the totals over every scenario that ran.
import { existsSync, readdirSync, readFileSync } from "fs";
import { basename, dirname, join } from "path";

const [dir, ...scenarios] = process.argv.slice(2);
const stamp = /-\d{4}-\d{2}-\d{2}T[\d-]+Z$/;
let bad = 0;

// Every result directory: DIR/<scenario>-<time>, DIR/<group>/<scenario>-<time>.
const ran = new Map();
const walk = (sub) => {
  for (const d of readdirSync(join(dir, sub), { withFileTypes: true })) {
    if (!d.isDirectory()) continue;
    const rel = sub ? `${sub}/${d.name}` : d.name;
    if (stamp.test(d.name) && existsSync(join(dir, rel, "checks.json"))) {
      ran.set(rel.replace(stamp, ""), rel);
    } else if (!stamp.test(d.name)) {
      walk(rel);
    }
  }
};
walk("");

for (const scenario of scenarios) {
  // Scenarios with a group ("auth/…") have their results in DIR/<group>/.
  const where = join(dir, dirname(scenario));
  const runs = existsSync(where) ? readdirSync(where).filter((d) => d.startsWith(basename(scenario) + "-2")) : [];
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

for (const name of ran.keys()) {
  if (!scenarios.includes(name)) {
    console.error(`${name}: ran but is not in the required list (add it)`);
    bad++;
  }
}

const total = { SUCCESS: 0, FAILURE: 0, WARNING: 0 };
for (const rel of ran.values()) {
  for (const c of JSON.parse(readFileSync(join(dir, rel, "checks.json"), "utf8"))) {
    if (c.status in total) total[c.status]++;
  }
}
console.log(`all ${ran.size} scenarios: ${total.SUCCESS} passed, ${total.FAILURE} failed, ${total.WARNING} warnings`);
process.exit(bad === 0 ? 0 : 1);
