// Numbers in the project's JSON files (run summaries, journal records). JSON has no NaN or infinity, and a
// non-finite loss is exactly what a failed run reports, so those values travel as the strings "nan", "inf"
// and "-inf". One writer and one reader for every file that carries them.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace tmx {

// `d` as a JSON number, or "nan", "inf", "-inf".
nlohmann::json NumberToJson(double d);

// A JSON number, or one of the three strings, as a double; nullopt for anything else.
std::optional<double> NumberFromJson(const nlohmann::json& j);

}  // namespace tmx
