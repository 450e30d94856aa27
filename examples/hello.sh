#!/bin/sh
# qsub examples/hello.sh: a script qsub sends with its job (README.md)
echo "hello from $(hostname)${SGE_TASK_ID:+, task $SGE_TASK_ID}"
