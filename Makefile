# README 只用两个命令：make run（跑完整服务的演示：最后一个 demo = true 的章节的 main）与 make test（全部测试）。
# 两者都先做一次幂等的环境准备：仓库内的 .venv，先装 torch==2.13.0（CPU 机器上不会拉几 GB 的 CUDA 版），
# 再以可编辑方式安装本包与 dev/docs 依赖，最后生成内嵌的小模型。
# make test 和 make docs 还要网站里浏览器练习题的前端依赖：npm ci 装 package-lock.json 钉住的
# Pyodide、CodeMirror 和 esbuild（node_modules 比 lock 旧时才重装）；make test 另要 Debian 的 chromium
# （浏览器端到端测试用；没有 /usr/bin/chromium 且有 apt-get 时安装，不用测试工具自己下载的浏览器）。
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
NPM_STAMP := node_modules/.package-lock.json
CHROMIUM := /usr/bin/chromium

.PHONY: setup run test docs model web chromium clean

setup: $(STAMP) model

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev,docs]"
	touch $(STAMP)

model: $(STAMP)
	$(BIN)/python tools/make_tiny_model.py --ensure

# npm ci 每次都会重写 node_modules/.package-lock.json，用它当时间戳
web: $(NPM_STAMP)

$(NPM_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "需要 Node.js（≥ 18）和 npm：网站的浏览器练习题要用 npm ci 安装 Pyodide 与 CodeMirror" >&2; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund
	touch $(NPM_STAMP)

chromium:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "没有 $(CHROMIUM)，也没有 apt-get：浏览器端到端测试会跳过（CI 里会失败）"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "安装 Debian 的 chromium（浏览器练习题的端到端测试用）"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		echo "安装 Debian 的 chromium（浏览器练习题的端到端测试用）"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	else \
		echo "没有 $(CHROMIUM)：浏览器端到端测试会跳过。要运行它：sudo apt-get install chromium fonts-wqy-microhei"; \
	fi

run: setup
	$(BIN)/python tools/steps.py run demo

test: setup web chromium
	$(BIN)/python tools/run_tests.py

# 构建网站到 site/；离线阅读：python -m http.server -d site，然后打开 http://127.0.0.1:8000/
docs: $(STAMP) web
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

clean:
	rm -rf $(VENV) models .cache site .steps node_modules
