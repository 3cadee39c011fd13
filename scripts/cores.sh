#!/usr/bin/env bash
# Sourced by the scripts: `cores` prints how many CPUs this process may run on (its affinity, so a
# container's or taskset's limit counts). GNU nproc alone also honours OMP_NUM_THREADS and
# OMP_THREAD_LIMIT, which are torch's thread settings, not the machine's: scripts/test.sh sets the first to 1
# for the test programs, and a build or ctest sized by it would use one core of many.
cores() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }
