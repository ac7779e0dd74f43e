// 在 Node 里用 Pyodide 评测：浏览器练习题的自检（practice/judge.py --self-check 调用）。
//
// 浏览器里跑的是 Pyodide 的 Python（3.14），本地判题用的是 .venv 的 CPython；两者版本不同，
// 所以参考答案、starter 和错误答案也要在 Pyodide 里各评测一次，和网页里的 Worker 用同一份 judge_core.py。
//
// 用法：node tools/web/judge_pyodide.mjs < jobs.json > results.json
//   输入  {"judge_core": "practice/judge_core.py 的路径", "timeout_s": 10,
//          "jobs": [{"code": "...", "tests": [{"name", "source", "hidden"}]}, ...]}
//   输出  {"python": "3.14.2", "load_ms": [...],
//          "results": [{"status", "passed", "total", "failed_tests", "grade_ms", "error"}]}
// 每次评测在 worker_threads 的线程里进行；超时就 terminate() 这个线程、换一个新的，和网页的做法一样。
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

async function workerMain() {
  const t0 = performance.now();
  const { loadPyodide } = await import(pathToFileURL(workerData.pyodideModule).href);
  const py = await loadPyodide({ indexURL: workerData.indexURL, stdout: () => {}, stderr: () => {} });
  py.FS.mkdirTree("/home/pyodide/judge");
  py.FS.writeFile("/home/pyodide/judge/judge_core.py", workerData.judgeCore);
  py.runPython("import sys; sys.path.insert(0, '/home/pyodide/judge'); import judge_core");
  const runJson = py.pyimport("judge_core").run_json;
  const version = py.runPython("import sys; sys.version.split()[0]");
  parentPort.postMessage({ type: "ready", loadMs: performance.now() - t0, python: version });
  parentPort.on("message", ({ code, tests }) => {
    const t = performance.now();
    let result;
    try {
      result = JSON.parse(runJson(JSON.stringify({ code, tests, redact_hidden: false })));
    } catch (e) {
      result = { status: "crash", outcomes: [], error: String(e) };
    }
    parentPort.postMessage({ type: "result", result, gradeMs: performance.now() - t });
  });
}

function readStdin() {
  return readFileSync(0, "utf-8");
}

class Slot {
  constructor(options) {
    this.options = options;
    this.worker = new Worker(new URL(import.meta.url), { workerData: options });
    this.ready = new Promise((resolve, reject) => {
      this.worker.once("message", (m) => (m.type === "ready" ? resolve(m) : reject(new Error(String(m)))));
      this.worker.once("error", reject);
    });
  }

  grade(job, timeoutMs) {
    return new Promise((resolve) => {
      const done = (value) => {
        clearTimeout(timer);
        this.worker.removeAllListeners("message");
        this.worker.removeAllListeners("error");
        resolve(value);
      };
      const fail = (status, error = "") => done({ result: { status, outcomes: [], error }, gradeMs: 0 });
      const timer = setTimeout(() => fail("timeout"), timeoutMs);
      this.worker.on("message", (m) => m.type === "result" && done(m));
      this.worker.on("error", (e) => fail("crash", String(e)));
      this.worker.postMessage({ code: job.code, tests: job.tests });
    });
  }
}

async function main() {
  const request = JSON.parse(readStdin());
  const require = createRequire(import.meta.url);
  const pyodideModule = require.resolve("pyodide/pyodide.mjs");
  const options = {
    pyodideModule,
    indexURL: dirname(pyodideModule) + "/",
    judgeCore: readFileSync(request.judge_core, "utf-8"),
  };
  const timeoutMs = (request.timeout_s ?? 10) * 1000;
  const loadMs = [];
  let python = "";
  let slot = new Slot(options);
  const results = [];
  for (const job of request.jobs) {
    const ready = await slot.ready;
    if (!slot.counted) {
      loadMs.push(Math.round(ready.loadMs)); // 每个线程的 Pyodide 加载时间记一次
      slot.counted = true;
    }
    python = ready.python;
    const { result, gradeMs } = await slot.grade(job, timeoutMs);
    const outcomes = result.outcomes || [];
    results.push({
      status: result.status,
      passed: outcomes.filter((o) => o.passed).length,
      total: outcomes.length,
      failed_tests: outcomes.filter((o) => !o.passed).map((o) => `${o.file}::${o.name}`),
      grade_ms: Math.round(gradeMs),
      error: result.error || "",
    });
    if (result.status === "timeout" || result.status === "crash") {
      await slot.worker.terminate();
      slot = new Slot(options);
    }
  }
  await slot.worker.terminate();
  process.stdout.write(JSON.stringify({ python, load_ms: loadMs, results }) + "\n");
}

if (isMainThread) {
  await main();
} else {
  await workerMain();
}
