// jobs_lua.h — jobs.lua, the Redis broker's one script, compiled in (CMake assembles it from lua/).
#pragma once

#include <string_view>

namespace delayq::broker::redis {
extern const std::string_view kJobsLua;
}
