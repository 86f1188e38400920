// jobs_lua.h — jobs.lua, the Redis broker's one script, compiled in (CMake assembles it from lua/).
#pragma once

#include <string_view>

namespace delayq::redis_broker {
extern const std::string_view kJobsLua;
}
