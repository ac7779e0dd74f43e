// 浏览器练习题的评测 Worker（模块 Worker）：在 Pyodide 里运行 practice/judge_core.py。
//
// 页面为每一次运行准备一个新的 Worker，用完就 terminate()：读者的代码改了什么（os.environ、
// 模块属性……）都随 Worker 一起丢掉，不会带到下一次运行。死循环由页面的计时器 terminate() 结束。
// 这个文件由 tools/docs_hooks.py 原样复制进网站的 assets/practice/，旁边是 pyodide/ 和 judge_core.py。
import { loadPyodide } from "./pyodide/pyodide.mjs";

const base = new URL("./", import.meta.url);
const version = new URL(import.meta.url).searchParams.get("v") || "";

const ready = (async () => {
  const t0 = performance.now();
  const [py, judgeCore] = await Promise.all([
    // 一定要给 indexURL：不给时 Pyodide 会去 CDN 找运行时文件，离线时失败
    loadPyodide({
      indexURL: new URL("pyodide/", base).href,
      stdout: () => {},
      stderr: () => {},
    }),
    fetch(new URL(`judge_core.py?v=${version}`, base)).then((r) => {
      if (!r.ok) throw new Error(`judge_core.py: HTTP ${r.status}`);
      return r.text();
    }),
  ]);
  py.FS.mkdirTree("/home/pyodide/judge");
  py.FS.writeFile("/home/pyodide/judge/judge_core.py", judgeCore);
  py.runPython("import sys; sys.path.insert(0, '/home/pyodide/judge'); import judge_core");
  const runJson = py.pyimport("judge_core").run_json;
  return { py, runJson, loadMs: performance.now() - t0 };
})();

ready.then(
  ({ py, loadMs }) => {
    const python = py.runPython("import sys; sys.version.split()[0]");
    postMessage({ type: "ready", loadMs, python });
  },
  (e) => postMessage({ type: "fatal", error: String(e && e.stack ? e.stack : e) }),
);

onmessage = async ({ data }) => {
  const { id, code, tests } = data;
  let runJson;
  try {
    ({ runJson } = await ready);
  } catch {
    return; // 已经报过 fatal
  }
  const t0 = performance.now();
  let result;
  try {
    result = JSON.parse(runJson(JSON.stringify({ code, tests })));
  } catch (e) {
    // judge_core 自己不会抛出；能到这里说明解释器出了问题（比如读者弄坏了 json 模块）
    result = { status: "crash", outcomes: [], error: String(e), output: "" };
  }
  postMessage({ type: "result", id, result, gradeMs: performance.now() - t0 });
};
