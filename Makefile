# README 只用两个命令：make run（跑最新一章的 main）与 make test（全部测试）。
# 两者都先做一次幂等的环境准备：仓库内的 .venv，先装 torch==2.13.0（CPU 机器上不会拉几 GB 的 CUDA 版），
# 再以可编辑方式安装本包与 dev/docs 依赖，最后生成内嵌的小模型。
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp

.PHONY: setup run test model clean

setup: $(STAMP) model

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev,docs]"
	touch $(STAMP)

model: $(STAMP)
	$(BIN)/python tools/make_tiny_model.py --ensure

run: setup
	$(BIN)/python tools/steps.py run latest

test: setup
	$(BIN)/python tools/run_tests.py

clean:
	rm -rf $(VENV) models .cache site .steps
