#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ptxas_check.sh <compile command>...: the CUDA compiler launcher of a step registered with
# add_step(... WERROR_PTXAS) (cmake/FlashStepsSteps.cmake). Runs the compile, passes its
# output through, and fails it when ptxas reported a "Potential Performance Loss" (e.g.
# "wgmma.mma_async instructions are serialized due to ...", "'setmaxnreg' ignored ..."):
# ptxas prints those as info, not as warnings, so --warning-as-error does not catch them.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2> "$log"
status=$?
cat "$log" >&2
if [ $status -eq 0 ] && grep -q "Potential Performance Loss" "$log"; then
  echo "ptxas_check: ptxas reported a potential performance loss (above); this step is built with" \
       "WERROR_PTXAS, so that fails the build" >&2
  exit 1
fi
exit $status
