# Which RocksDB delayq links (docs/operations.md, "RocksDB: the production build or Debian's"): the
# production build of Debian's own source package, which scripts/install-deps.sh puts in a cache
# outside the checkout (the same path as here) for the installed librocksdb-dev's version, when
# it is there; Debian's library otherwise. -DDELAYQ_ROCKSDB=debian keeps Debian's even where the
# cache has a build.
# Sets DELAYQ_ROCKSDB_BUILD: "production" or "debian".
set(DELAYQ_ROCKSDB auto CACHE STRING
  "auto: the cached production build of Debian's RocksDB if there is one, else Debian's; debian")
set_property(CACHE DELAYQ_ROCKSDB PROPERTY STRINGS auto debian)

set(DELAYQ_ROCKSDB_BUILD debian)
if(DELAYQ_ROCKSDB STREQUAL "auto")
  execute_process(COMMAND dpkg-query -W -f=\${Version} librocksdb-dev
    OUTPUT_VARIABLE _delayq_rocksdb_version ERROR_QUIET RESULT_VARIABLE _delayq_dpkg)
  if(DEFINED ENV{DELAYQ_CACHE})
    set(_delayq_cache "$ENV{DELAYQ_CACHE}")
  elseif(DEFINED ENV{XDG_CACHE_HOME})
    set(_delayq_cache "$ENV{XDG_CACHE_HOME}/delayq")
  else()
    set(_delayq_cache "$ENV{HOME}/.cache/delayq")
  endif()
  set(_delayq_prefix "${_delayq_cache}/rocksdb/${_delayq_rocksdb_version}")
  if(_delayq_dpkg EQUAL 0 AND EXISTS "${_delayq_prefix}/lib/librocksdb.a"
     AND EXISTS "${_delayq_prefix}/lib/cmake/rocksdb/RocksDBConfig.cmake")
    set(RocksDB_DIR "${_delayq_prefix}/lib/cmake/rocksdb" CACHE PATH "RocksDB's CMake package" FORCE)
    set(DELAYQ_ROCKSDB_BUILD production)
  endif()
endif()
if(DELAYQ_ROCKSDB_BUILD STREQUAL "debian" AND RocksDB_DIR MATCHES "/rocksdb/[^/]+/lib/cmake/rocksdb$")
  unset(RocksDB_DIR CACHE)  # a cached build chosen by an earlier configure, gone or refused since
endif()
find_package(RocksDB REQUIRED CONFIG)
message(STATUS "RocksDB ${RocksDB_VERSION}: ${DELAYQ_ROCKSDB_BUILD} build (${RocksDB_DIR})")
