// 浏览器练习题：CodeMirror 6 编辑器 + 运行/重置按钮 + 在 Web Worker 的 Pyodide 里判题。
//
// tools/docs_hooks.py 在构建网站时用 esbuild 把这个文件打包成 assets/practice/practice.js，
// 题目页里的 <div class="practice"> 带着一段 JSON（起始代码、测试文件、测试名），这里把它变成编辑器。
// 判题：每次运行用一个新的 Worker（worker.mjs），超时就 terminate()；页面打开时就在后台准备第一个，
// 每次运行结束后立刻准备下一个，所以两次运行之间不共享任何解释器状态，读者也很少需要等；
// 死循环也不会卡住页面。
import { indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { indentUnit, syntaxHighlighting } from "@codemirror/language";
import { EditorState, Prec } from "@codemirror/state";
import { EditorView, keymap } from "@codemirror/view";
import { classHighlighter } from "@lezer/highlight";
import { basicSetup } from "codemirror";

// 这个脚本自己的地址：worker.mjs、judge_core.py、pyodide/ 都在它旁边
const SCRIPT_URL = document.currentScript ? document.currentScript.src : "";
const BASE = new URL("./", SCRIPT_URL || location.href);
const STORAGE_PREFIX = "minisgl-practice:";
const LOAD_TIMEOUT_MS = 180_000; // 加载 Pyodide 的上限：慢网络下载 13 MB 也够了，卡死时不至于永远等下去

const SERVE_HINT =
  "从磁盘直接打开的网页（file://）不能启动 Web Worker，所以不能判题。请在仓库根目录运行 " +
  "`make docs && python -m http.server -d site`（或 `.venv/bin/mkdocs serve`），" +
  "再打开 http://127.0.0.1:8000/ ；也可以用页面下方的命令在本地判题。";

// ------------------------------------------------------------------ 判题：Worker 管理

class Runner {
  constructor(version) {
    this.version = version;
    this.spare = null; // 预先启动、还没用过的 Worker
    this.loads = []; // 每个 Worker 的 Pyodide 加载时间（毫秒），给测试和状态栏用
  }

  spawn() {
    const startedAt = performance.now();
    const worker = new Worker(new URL(`worker.mjs?v=${this.version}`, BASE), { type: "module" });
    const ready = new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => {
        if (data.type === "ready") {
          this.loads.push(performance.now() - startedAt);
          resolve(data);
        } else if (data.type === "fatal") {
          reject(new Error(data.error));
        }
      };
      worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(event.message || "Worker 启动失败"));
      };
      setTimeout(() => reject(new Error(`${LOAD_TIMEOUT_MS / 1000} 秒内没有加载完`)), LOAD_TIMEOUT_MS);
    });
    ready.catch(() => {}); // 失败在 run() 里处理
    return { worker, ready };
  }

  /** 在后台准备好下一个 Worker（第一次聚焦编辑器时、每次运行结束后调用）。 */
  warm() {
    if (!this.spare) this.spare = this.spawn();
  }

  /**
   * 评测一次。onReady 在 Worker 就绪、开始计时的时候调用。
   * 返回 judge_core 的报告（dict），外加 timeout / crash / fatal 这几种由页面判定的结果。
   */
  async run(code, tests, timeoutMs, onReady) {
    this.warm();
    const { worker, ready } = this.spare;
    this.spare = null;
    try {
      await ready;
    } catch (e) {
      worker.terminate();
      return { status: "fatal", error: `Python 运行时加载失败：${e.message}`, outcomes: [] };
    }
    onReady();
    const t0 = performance.now();
    const result = await new Promise((resolve) => {
      // 计时从 Worker 就绪后开始：加载 Pyodide 的时间不算在时限里
      const timer = setTimeout(() => resolve({ status: "timeout", outcomes: [] }), timeoutMs);
      worker.onmessage = ({ data }) => {
        if (data.type === "result") {
          clearTimeout(timer);
          resolve({ ...data.result, gradeMs: data.gradeMs });
        }
      };
      worker.onerror = (event) => {
        event.preventDefault();
        clearTimeout(timer);
        resolve({ status: "crash", error: event.message || "Worker 异常退出", outcomes: [] });
      };
      worker.postMessage({ id: 1, code, tests });
    });
    worker.terminate(); // 用过的解释器不再复用
    result.wallMs = performance.now() - t0;
    this.warm();
    return result;
  }
}

let sharedRunner = null;
function runnerFor(version) {
  if (!sharedRunner) sharedRunner = new Runner(version);
  return sharedRunner;
}

// ------------------------------------------------------------------ 页面

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function loadDraft(id) {
  try {
    return localStorage.getItem(STORAGE_PREFIX + id);
  } catch {
    return null;
  }
}

function saveDraft(id, code, starter) {
  try {
    if (code === starter) localStorage.removeItem(STORAGE_PREFIX + id);
    else localStorage.setItem(STORAGE_PREFIX + id, code);
  } catch {
    // 隐私模式等情况下存不了草稿，不影响做题
  }
}

/** 超时或 Worker 崩溃时，judge_core 没有机会列出测试：按构建时算好的测试名全部记为失败。 */
function allFailed(spec, message) {
  const outcomes = [];
  for (const test of spec.tests) {
    for (const name of spec.names[test.name] || ["<load>"]) {
      outcomes.push({ file: test.name, name, passed: false, hidden: test.hidden, message, output: "" });
    }
  }
  return outcomes;
}

const STATUS_TEXT = {
  ok: "全部通过",
  fail: "有测试没通过",
  load_error: "代码加载失败",
  timeout: "超时",
  crash: "评测进程异常退出",
  fatal: "Python 运行时加载失败",
};

class Practice {
  constructor(root, spec) {
    this.root = root;
    this.spec = spec;
    this.runner = runnerFor(spec.version);
    this.running = false;
    this.lastResult = null;
    this.build();
  }

  build() {
    const { spec } = this;
    this.root.textContent = "";
    const editorBox = el("div", { class: "practice-editor" });
    this.runButton = el("button", {
      class: "md-button md-button--primary practice-run",
      type: "button",
      title: "运行全部测试（Ctrl/⌘ + Enter）",
      text: "运行测试",
    });
    this.resetButton = el("button", {
      class: "md-button practice-reset",
      type: "button",
      title: "把编辑器恢复成起始代码",
      text: "重置代码",
    });
    this.status = el("span", {
      class: "practice-status",
      "data-status": "idle",
      role: "status",
      "aria-live": "polite",
    });
    this.errorBox = el("pre", { class: "practice-error" });
    this.errorBox.hidden = true;
    this.outputBox = el("div", { class: "practice-output" });
    this.outputBox.hidden = true;
    this.results = el("ul", { class: "practice-results" });
    this.root.append(
      editorBox,
      el("div", { class: "practice-bar" }, this.runButton, this.resetButton, this.status),
      this.errorBox,
      this.outputBox,
      this.results,
    );

    const run = () => {
      this.run();
      return true;
    };
    this.view = new EditorView({
      parent: editorBox,
      state: EditorState.create({
        doc: loadDraft(spec.id) ?? spec.starter,
        extensions: [
          basicSetup,
          python(),
          indentUnit.of("    "),
          EditorState.tabSize.of(4),
          syntaxHighlighting(classHighlighter),
          Prec.highest(keymap.of([{ key: "Mod-Enter", run }, indentWithTab])),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) saveDraft(spec.id, this.getCode(), spec.starter);
            if (update.focusChanged && update.view.hasFocus) this.warm();
          }),
          EditorView.contentAttributes.of({ "aria-label": `${spec.title} 的代码` }),
        ],
      }),
    });
    this.runButton.addEventListener("click", () => this.run());
    this.resetButton.addEventListener("click", () => this.reset());
    if (location.protocol === "file:") {
      this.runButton.disabled = true;
      this.setStatus("unavailable", "不能在这里判题");
      this.showError(SERVE_HINT);
    } else {
      this.setStatus("idle", "第一次运行要下载约 13 MB 的 Python 运行时（之后有缓存）");
      // 页面一打开就在后台准备 Python：读题、写代码的工夫里就加载好了
      this.warm();
    }
  }

  getCode() {
    return this.view.state.doc.toString();
  }

  setCode(code) {
    this.view.dispatch({ changes: { from: 0, to: this.view.state.doc.length, insert: code } });
  }

  reset() {
    this.setCode(this.spec.starter);
    this.results.textContent = "";
    this.errorBox.hidden = true;
    this.outputBox.hidden = true;
    if (!this.running && location.protocol !== "file:") this.setStatus("idle", "已恢复起始代码");
  }

  warm() {
    if (location.protocol !== "file:") this.runner.warm();
  }

  setStatus(status, text) {
    this.status.dataset.status = status;
    this.status.textContent = text;
  }

  showError(text) {
    this.errorBox.textContent = text;
    this.errorBox.hidden = !text;
  }

  async run() {
    if (this.running || location.protocol === "file:") return;
    this.running = true;
    this.runButton.disabled = true;
    this.results.textContent = "";
    this.showError("");
    this.outputBox.hidden = true;
    // 等 Python 就绪时每秒更新一次用了几秒：看得出页面没有卡住（已经在后台准备好时这一步一闪而过）
    const waitStart = performance.now();
    const showWait = () => {
      const seconds = Math.round((performance.now() - waitStart) / 1000);
      this.setStatus("loading", `正在准备 Python 运行时……已等 ${seconds} 秒`);
    };
    showWait();
    const ticker = setInterval(showWait, 1000);
    const { spec } = this;
    const tests = spec.tests.map(({ name, source, hidden }) => ({ name, source, hidden }));
    let result;
    try {
      result = await this.runner.run(this.getCode(), tests, spec.timeoutS * 1000, () => {
        clearInterval(ticker);
        this.setStatus("running", "运行中……");
      });
    } catch (e) {
      result = { status: "fatal", error: String(e), outcomes: [] };
    } finally {
      clearInterval(ticker);
    }
    if (result.status === "timeout") {
      result.error =
        `超时：运行超过 ${spec.timeoutS} 秒仍未结束（有死循环，或者算法太慢？），已经终止；` +
        "所有测试记为失败。下一次运行会换一个新的 Python。";
      result.outcomes = allFailed(spec, "超时");
    } else if (result.status === "crash" || result.status === "fatal") {
      result.outcomes = allFailed(spec, STATUS_TEXT[result.status]);
    }
    this.lastResult = result;
    this.render(result);
    this.running = false;
    this.runButton.disabled = false;
  }

  render(result) {
    const outcomes = result.outcomes || [];
    const passed = outcomes.filter((o) => o.passed).length;
    const failed = outcomes.length - passed;
    const time = result.gradeMs != null ? `，用时 ${(result.gradeMs / 1000).toFixed(2)} 秒` : "";
    const label = STATUS_TEXT[result.status] || result.status;
    this.setStatus(result.status, `${label}：${passed} passed, ${failed} failed${time}`);
    if (result.status === "load_error") {
      this.showError(`你的代码加载失败（测试没有运行）：\n${result.error}`);
    } else if (result.error) {
      this.showError(result.error);
    }
    if (result.output) {
      this.outputBox.textContent = "";
      this.outputBox.append(el("p", { text: "加载代码时的输出：" }), el("pre", { text: result.output }));
      this.outputBox.hidden = false;
    }
    const detailed = result.status === "ok" || result.status === "fail";
    for (const o of outcomes) {
      const id = `${o.file}::${o.name}`;
      const item = el("li", {
        class: o.passed ? "practice-pass" : "practice-fail",
        "data-test": id,
        "data-ok": String(o.passed),
        "data-hidden": String(Boolean(o.hidden)),
      });
      const mark = el("span", { class: "practice-mark", text: o.passed ? "✓ PASS" : "✗ FAIL" });
      item.append(mark, " ", el("code", { text: id }));
      if (o.hidden) item.append(el("span", { class: "practice-hidden", text: "（隐藏测试）" }));
      if (!o.passed && detailed) {
        if (o.hidden) {
          item.append(el("div", { class: "practice-note", text: "隐藏测试只显示名字和结果。" }));
        } else {
          if (o.message) item.append(el("pre", { class: "practice-msg", text: o.message }));
          if (o.output) {
            item.append(el("div", { class: "practice-note", text: "输出：" }), el("pre", { text: o.output }));
          }
        }
      }
      this.results.append(item);
    }
  }
}

// ------------------------------------------------------------------ 挂载

const mounted = [];

function mountAll() {
  for (const root of document.querySelectorAll(".practice:not([data-mounted])")) {
    const data = root.querySelector("script.practice-data");
    if (!data) continue;
    root.dataset.mounted = "true";
    try {
      mounted.push(new Practice(root, JSON.parse(data.textContent)));
    } catch (e) {
      root.append(el("pre", { class: "practice-error", text: `编辑器初始化失败：${e}` }));
    }
  }
  // 给浏览器测试用：window.__practice[0].setCode(...)、.lastResult、runner.loads
  window.__practice = mounted.filter((p) => document.contains(p.root));
}

if (window.document$ && typeof window.document$.subscribe === "function") {
  window.document$.subscribe(mountAll); // mkdocs-material 的页面切换（navigation.instant）
} else if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", mountAll);
} else {
  mountAll();
}
