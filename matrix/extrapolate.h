// Extrapolation from proxies: a proxy cell's numbers (matrix/proxy_cell.h) at a few depths, and at two
// vocabularies where the proxies cut the ids too, carried to the config's real size. Pure functions of the
// numbers a record holds, so `tune-matrix calibration` replays records made under an earlier rule with
// today's (matrix/calibration.h).
#pragma once

#include <vector>

#include "matrix/cell.h"

namespace tmx::matrix {

// The value at `real` of the line through (layers[0], values[0]) and (layers.back(), values.back()): a fixed
// part plus a cost per layer. A negative slope (the proxies' noise over a cost too small to see) counts as
// none, so the extrapolation is never below the deepest proxy's value. REQUIRES: two or more points, the
// layers increasing.
double ExtrapolateToDepth(const std::vector<double>& layers, const std::vector<double>& values, double real);

// The value at `real_layers` and `real_vocab` of proxies that cut the vocabulary too (CellResult::proxy_vocab):
// proxies 0 and 1 share a vocabulary and give the line over depth (ExtrapolateToDepth), proxies 0 and 2 share
// a depth and give the cost per id (none when negative), added for the ids proxy 0 lacks. REQUIRES: three
// points so arranged.
double ExtrapolateToSize(const std::vector<double>& layers, const std::vector<double>& vocab,
                         const std::vector<double>& values, double real_layers, double real_vocab);

// The real size's extrapolations (step time, tokens/s, FLOP/s, peak memory) from the proxies' numbers the
// record holds (proxy_layers, proxy_vocab, proxy_step_times_s, ...; real_layers, real_vocab), replacing any it
// had. A reading that falls with depth (or rises as ids are cut) extrapolates nothing for its quantity and
// sets proxy_note to say so. Nothing is extrapolated from fewer than two depths (three proxies with a
// vocabulary cut), from lists of unequal lengths, or from proxies that span no line (two at one depth, a real
// size smaller than theirs).
void ExtrapolateFromProxies(CellResult* r);

}  // namespace tmx::matrix
