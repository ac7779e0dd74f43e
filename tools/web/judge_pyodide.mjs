// 在 Node 里用 Pyodide 评测：浏览器练习题的自检（practice/judge.py --self-check 调用）。
//
// 浏览器里跑的是 Pyodide 的 Python（3.14），本地判题用的是 .venv 的 CPython；两者版本不同，
// 所以参考答案、starter 和错误答案也要在 Pyodide 里各评测一次，和网页里的 Worker 用同一份 judge_core.py。
//
// 用法：node tools/web/judge_pyodide.mjs < jobs.json > results.json
//   输入  {"judge_core": "practice/judge_core.py 的路径", "timeout_s": 10, "threads": 2,
//          "jobs": [{"code": "...", "tests": [{"name", "source", "hidden"}]}, ...]}
//   输出  {"python": "3.14.2", "snapshot": true, "load_ms": [...],
//          "results": [{"status", "passed", "total", "failed_tests", "load_ms", "grade_ms", "error"}]}
//
// 和网页一样，每次评测都用一个全新的解释器：上一次评测的代码改了什么（模块属性、judge_core 的函数、
// os.environ……）都带不到下一次。整个加载一次 Pyodide 要约 2 秒，几百次评测吃不消，所以先加载一次、
// 导入 judge_core 后做一份内存快照，每次评测从快照恢复出一个新的解释器（约 0.2 秒）；
// 这个 Pyodide 版本做不了快照时，退回每次完整加载。
// 评测在 worker_threads 的线程里进行（threads 个线程同时评测）：新解释器准备好之后才开始计时，
// 超时就 terminate() 这个线程、换一个新的。
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

const JUDGE_DIR = "/home/pyodide/judge";
const SETUP = `import sys; sys.path.insert(0, '${JUDGE_DIR}'); import judge_core`;
const LOAD_TIMEOUT_MS = 120_000; // 准备一个新解释器最多等多久（不算进评测的时限）

async function freshInterpreter(options, extra = {}) {
  const { loadPyodide } = await import(pathToFileURL(options.pyodideModule).href);
  const quiet = { indexURL: options.indexURL, stdout: () => {}, stderr: () => {} };
  const py = await loadPyodide(
    options.snapshot ? { ...quiet, _loadSnapshot: options.snapshot } : { ...quiet, ...extra },
  );
  // 快照里 judge_core 已经导入；文件仍然写一份，出错时 traceback 能找到源码
  py.FS.mkdirTree(JUDGE_DIR);
  py.FS.writeFile(`${JUDGE_DIR}/judge_core.py`, options.judgeCore);
  if (!options.snapshot) py.runPython(SETUP);
  return py;
}

async function makeSnapshot(options) {
  try {
    const py = await freshInterpreter({ ...options, snapshot: null }, { _makeSnapshot: true });
    return py.makeMemorySnapshot();
  } catch {
    return null; // 这个版本做不了快照：每次评测完整加载
  }
}

async function workerMain() {
  parentPort.postMessage({ type: "ready" });
  parentPort.on("message", async ({ code, tests }) => {
    let py;
    const t0 = performance.now();
    try {
      py = await freshInterpreter(workerData);
    } catch (e) {
      parentPort.postMessage({ type: "result", result: { status: "crash", outcomes: [], error: String(e) } });
      return;
    }
    const loadMs = performance.now() - t0;
    const python = py.runPython("import sys; sys.version.split()[0]");
    parentPort.postMessage({ type: "loaded", loadMs, python });
    const t = performance.now();
    let result;
    try {
      const runJson = py.pyimport("judge_core").run_json;
      result = JSON.parse(runJson(JSON.stringify({ code, tests, redact_hidden: false })));
    } catch (e) {
      result = { status: "crash", outcomes: [], error: String(e) };
    }
    parentPort.postMessage({ type: "result", result, gradeMs: performance.now() - t });
    // 用过的解释器不再复用：丢掉引用，交给垃圾回收
  });
}

function readStdin() {
  return readFileSync(0, "utf-8");
}

class Slot {
  constructor(options) {
    this.worker = new Worker(new URL(import.meta.url), { workerData: options });
    this.ready = new Promise((resolve, reject) => {
      this.worker.once("message", (m) => (m.type === "ready" ? resolve(m) : reject(new Error(String(m)))));
      this.worker.once("error", reject);
    });
  }

  grade(job, timeoutMs) {
    return new Promise((resolve) => {
      let loaded = { loadMs: 0, python: "" };
      let timer = setTimeout(() => fail("crash", "准备新的 Pyodide 解释器超时"), LOAD_TIMEOUT_MS);
      const done = (value) => {
        clearTimeout(timer);
        this.worker.removeAllListeners("message");
        this.worker.removeAllListeners("error");
        resolve({ ...loaded, ...value });
      };
      const fail = (status, error = "") => done({ result: { status, outcomes: [], error }, gradeMs: 0 });
      this.worker.on("message", (m) => {
        if (m.type === "loaded") {
          loaded = { loadMs: m.loadMs, python: m.python };
          clearTimeout(timer); // 时限从新解释器准备好的那一刻算起
          timer = setTimeout(() => fail("timeout"), timeoutMs);
        } else if (m.type === "result") {
          done(m);
        }
      });
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
  options.snapshot = await makeSnapshot(options);
  const timeoutMs = (request.timeout_s ?? 10) * 1000;
  const threads = Math.max(1, Math.min(request.threads ?? 1, request.jobs.length || 1));
  const loadMs = [];
  const results = new Array(request.jobs.length);
  let python = "";
  let next = 0;
  // threads 个线程同时评测，各自按顺序领下一个任务；结果按任务原来的顺序排好
  async function runner() {
    let slot = new Slot(options);
    while (next < request.jobs.length) {
      const index = next++;
      await slot.ready;
      const graded = await slot.grade(request.jobs[index], timeoutMs);
      const { result, gradeMs, loadMs: jobLoadMs, python: version } = graded;
      loadMs.push(Math.round(jobLoadMs));
      python = version || python;
      const outcomes = result.outcomes || [];
      results[index] = {
        status: result.status,
        passed: outcomes.filter((o) => o.passed).length,
        total: outcomes.length,
        failed_tests: outcomes.filter((o) => !o.passed).map((o) => `${o.file}::${o.name}`),
        load_ms: Math.round(jobLoadMs),
        grade_ms: Math.round(gradeMs),
        error: result.error || "",
      };
      if (result.status === "timeout" || result.status === "crash") {
        await slot.worker.terminate();
        slot = new Slot(options);
      }
    }
    await slot.worker.terminate();
  }
  await Promise.all(Array.from({ length: threads }, runner));
  process.stdout.write(
    JSON.stringify({ python, snapshot: options.snapshot !== null, load_ms: loadMs, results }) + "\n",
  );
}

if (isMainThread) {
  await main();
} else {
  await workerMain();
}
