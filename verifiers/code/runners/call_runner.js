// The call-style test runner for JavaScript and TypeScript programs, run by node inside the jail (never on the host).
//
// It reads the plan (JSON: a marker and, per test unit, the calls to make) from stdin; it loads the program
// (solution.js) as a script in this realm, so its
// top-level functions and bindings are reachable by name; it calls each unit's functions with the given arguments under
// the unit's time limit (vm's timeout interrupts a synchronous loop); and it writes one line per unit,
// "<marker> <JSON record>", with each returned value as JSON text. Expected values never come here: the host compares.
//
// Unlike the Python runner, the program runs in the runner's own process (node cannot fork a worker), and it can read
// the plan (stdin stays open: libuv refuses to close fd 0): call inputs and the marker, never an expected value. A line
// it forges with the marker gains nothing: the host still compares the value in it with one the program never sees.
// Public and hidden tests come in separate runs (runner_plans.runner_groups): a run whose errors and values a verdict's
// reason may quote never holds a hidden input.
"use strict";
const fs = require("fs");
const vm = require("vm");
const stringify = JSON.stringify;
const writeSync = fs.writeSync;
const exit = process.exit.bind(process);
const bufferFrom = Buffer.from;
const now = () => Number(process.hrtime.bigint()) / 1e9;

const plan = JSON.parse(fs.readFileSync(0, "utf8"));
const marker = plan.marker;
function emit(record) {
  let line = bufferFrom(marker + " " + stringify(record) + "\n", "utf8");
  while (line.length) line = line.subarray(writeSync(1, line));
}

function answer(value) {
  // Plain data only, as JSON: undefined reads as null; a value JSON cannot hold (a cycle, a BigInt) fails the call.
  try {
    const text = stringify(value === undefined ? null : value, (k, v) => (v === undefined ? null : v));
    return text === undefined ? ["E", "returned a value that is not data"] : ["J", text];
  } catch (e) {
    return ["E", "returned a value that is not data: " + String(e && e.message)];
  }
}

function describe(error) {
  try {
    return error instanceof Error ? error.name + ": " + error.message : "threw " + String(error);
  } catch (e) {
    return "threw a value that cannot be shown";
  }
}

const source = fs.readFileSync(process.argv[2], "utf8");
globalThis.require = require;
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;
let loadProblem = null;
const importLimit = Math.max(1, Math.round(plan.import_limit_s * 1000));
try {
  vm.runInThisContext(source, { filename: "solution.js", timeout: importLimit });
} catch (e) {
  loadProblem = describe(e);
}

const IDENT = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;
let stopped = null;
// Index loops only from here on: the program may have replaced Array.prototype's methods and iterators.
for (let index = 0; index < plan.units.length; index++) {
  const unit = plan.units[index];
  if (stopped) {
    emit({ unit: index, status: stopped[0], detail: stopped[1] });
    continue;
  }
  if (loadProblem !== null) {
    emit({ unit: index, status: "import_error", detail: loadProblem });
    continue;
  }
  const deadline = now() + unit.time_limit_s;
  const answers = [];
  let status = "done";
  for (let k = 0; k < unit.calls.length; k++) {
    const call = unit.calls[k];
    const left = Math.round((deadline - now()) * 1000);
    if (left <= 0) {
      status = "timeout";
      break;
    }
    if (!IDENT.test(call.fn)) {
      answers[answers.length] = ["E", "no function named " + call.fn];
      continue;
    }
    globalThis.__groupscore_args = call.args;
    try {
      // The exported function when the program exports it (module.exports.f), else the script-level binding.
      const value = vm.runInThisContext(
        "(typeof module === 'object' && module.exports && typeof module.exports." + call.fn + " === 'function' ? " +
          "module.exports." + call.fn + " : " + call.fn + ")(...globalThis.__groupscore_args)",
        { timeout: left },
      );
      answers[answers.length] = answer(value);
    } catch (e) {
      if (e && e.code === "ERR_SCRIPT_EXECUTION_TIMEOUT") {
        status = "timeout";
        break;
      }
      answers[answers.length] = ["E", describe(e)];
    }
  }
  emit(status === "done" ? { unit: index, status, answers } : { unit: index, status });
  let failed = status !== "done";
  for (let k = 0; k < answers.length; k++) failed = failed || answers[k][0] !== "J";
  if (plan.stop_on_failure && failed) stopped = ["skipped", "an earlier test failed"];
}
emit({ end: true });
exit(0);
