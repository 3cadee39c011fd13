// The LibTorch headers precompiled once for every target that uses torch (see TuneMatrixTargets.cmake).
// Project headers must not include <torch/torch.h>: they include the narrow headers they need.
#pragma once
#include <torch/torch.h>
