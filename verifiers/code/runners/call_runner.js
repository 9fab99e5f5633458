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
// Everything the runner uses once the program is loaded is captured here, before it: the program may replace any
// global, prototype method or module export (process.hrtime, Math.round, JSON.stringify, vm.Script.prototype, ...).
const fs = require("fs");
const vm = require("vm");
const crypto = require("crypto");
const stringify = JSON.stringify;
const writeSync = fs.writeSync;
const exit = process.exit.bind(process);
const bufferFrom = Buffer.from;
const hrtimeBigint = process.hrtime.bigint;
const toNumber = Number;
const round = Math.round;
const max = Math.max;
const apply = Reflect.apply;
const defineProperty = Reflect.defineProperty;
const ownDescriptor = Reflect.getOwnPropertyDescriptor;
const freeze = Object.freeze;
const substring = String.prototype.substring;
const subarray = Uint8Array.prototype.subarray;
const runScript = vm.Script.prototype.runInThisContext;
const now = () => toNumber(hrtimeBigint()) / 1e9;

const plan = JSON.parse(fs.readFileSync(0, "utf8"));
const marker = plan.marker;
function emit(text) {
  // `text` is JSON built here from primitives only: stringify of an object would look up toJSON on its prototypes.
  let line = bufferFrom(marker + " " + text + "\n", "utf8");
  while (line.length) line = apply(subarray, line, [writeSync(1, line)]);
}

// A call's result, made inside the timed script: "J" + JSON, or "E" + a message. Turning the value into JSON (toJSON
// methods, getters, Proxy traps) and describing a thrown value (its name and message getters) run the program's code,
// so they run under the test's time limit too. What the script returns is checked to be a primitive string.
function answer(value) {
  // Plain data only, as JSON: undefined reads as null; a value JSON cannot hold (a cycle, a BigInt) fails the call.
  try {
    const text = stringify(value === undefined ? null : value, (k, v) => (v === undefined ? null : v));
    return text === undefined ? "Ereturned a value that is not data" : "J" + text;
  } catch (e) {
    return "Ereturned a value that is not data: " + String(e && e.message);
  }
}

function describe(error) {
  try {
    return "E" + (error instanceof Error ? error.name + ": " + error.message : "threw " + String(error));
  } catch (e) {
    return "Ethrew a value that cannot be shown";
  }
}

// The call's inputs reach the script through a global of a name the program cannot know in advance, defined (never
// assigned: an assignment would run a setter the program put on the global object's prototypes) before each call.
const slot = "__groupscore_" + crypto.randomBytes(16).toString("hex");
const IDENT = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;
const scripts = new Map();
function callScript(fn) {
  // The exported function when the program exports it (module.exports.f), else the script-level binding.
  if (!IDENT.test(fn)) return null;
  if (!scripts.has(fn)) {
    const source =
      "(function (s) { let v; try { v = (typeof module === 'object' && module.exports && " +
      "typeof module.exports." + fn + " === 'function' ? module.exports." + fn + " : " + fn + ")(...s.args); } " +
      "catch (e) { return s.describe(e); } return s.answer(v); })(globalThis." + slot + ")";
    scripts.set(fn, new vm.Script(source, { filename: "groupscore-call.js" }));
  }
  return scripts.get(fn);
}
// Per unit, per call: its script (null: no function name), made before the program can touch Map or RegExp.
const compiled = plan.units.map((unit) => unit.calls.map((call) => callScript(call.fn)));

const source = fs.readFileSync(process.argv[2], "utf8");
globalThis.require = require;
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;
let loadProblem = null;
const importLimit = max(1, round(plan.import_limit_s * 1000));
try {
  vm.runInThisContext(source, { filename: "solution.js", timeout: importLimit });
} catch (e) {
  loadProblem = apply(substring, describe(e), [1]);
}

let stopped = null;
// From here on: index loops, no method of a program-reachable object, no assignment to an array or object the
// program could have put a setter on (Array.prototype[0], ...), records built as text from primitives.
// A unit's clock runs from the end of the unit before it: whatever runs between the timed calls (the runner's own
// steps, the program's code if any of them reached it) counts against some unit, never against none.
let clock = now();
for (let index = 0; index < plan.units.length; index++) {
  const unit = plan.units[index];
  const head = '{"unit":' + index + ',"status":';
  if (stopped) {
    emit(head + stringify(stopped[0]) + ',"detail":' + stringify(stopped[1]) + "}");
    continue;
  }
  if (loadProblem !== null) {
    emit(head + '"import_error","detail":' + stringify(loadProblem) + "}");
    continue;
  }
  const deadline = clock + unit.time_limit_s;
  let answers = "";
  let failed = false;
  let status = "done";
  for (let k = 0; k < unit.calls.length; k++) {
    const call = unit.calls[k];
    const left = round((deadline - now()) * 1000);
    if (left <= 0) {
      status = "timeout";
      break;
    }
    let result;
    // Null-prototype descriptors and options: reading a missing field would run a getter on Object.prototype.
    const inputs = freeze({ __proto__: null, args: call.args, answer, describe });
    if (compiled[index][k] === null) {
      result = "Eno function named " + call.fn;
    } else if (!defineProperty(globalThis, slot, { __proto__: null, value: inputs, configurable: true })) {
      result = "Ethe program made the global object unchangeable";
    } else {
      try {
        const options = { __proto__: null, timeout: left, displayErrors: false, breakOnSigint: false };
        result = apply(runScript, compiled[index][k], [options]);
      } catch (e) {
        // Only our script's own failures get here (the program's errors are caught inside it): vm's timeout, or a
        // stack overflow in describe/answer. The code is read as an own property, never through a prototype.
        const code = typeof e === "object" && e !== null ? ownDescriptor(e, "code") : undefined;
        if ((code !== undefined && code.value === "ERR_SCRIPT_EXECUTION_TIMEOUT") || now() >= deadline) {
          status = "timeout";
          break;
        }
        result = "Ethe call failed outside the program";
      }
    }
    if (typeof result !== "string" || result.length === 0) result = "Ereturned no result";
    const kind = result[0] === "J" ? "J" : "E";
    failed = failed || kind !== "J";
    answers += (k > 0 ? "," : "") + "[" + stringify(kind) + "," + stringify(apply(substring, result, [1])) + "]";
  }
  if (now() > deadline) status = "timeout"; // the unit's time was spent, timed script or not
  clock = now();
  emit(head + (status === "done" ? '"done","answers":[' + answers + "]}" : stringify(status) + "}"));
  if (plan.stop_on_failure && (failed || status !== "done")) stopped = ["skipped", "an earlier test failed"];
}
emit('{"end":true}');
exit(0);
