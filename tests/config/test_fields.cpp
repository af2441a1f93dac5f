#include <doctest/doctest.h>

#include <set>
#include <string>

#include "dtrain/config/fields.hpp"

using namespace dtrain::config;

TEST_SUITE("config::fields") {
  TEST_CASE("the registry has every spec field once, with a parent section and a doc line") {
    std::set<std::string> seen;
    for (const auto& f : spec_fields()) {
      INFO(f.path);
      CHECK(seen.insert(f.path).second);
      CHECK(std::string(f.doc).size() > 5);
      CHECK(std::string(f.default_text).size() > 0);
      std::string p = f.path;
      auto parent = p.substr(0, p.rfind('/'));
      if (!parent.empty()) CHECK(find_field(parent) != nullptr);
      if (f.type != FieldType::object) CHECK(static_cast<bool>(f.apply));
    }
    for (const char* p : {"/version", "/name", "/command", "/workdir", "/cluster/instances", "/cluster/gpus_per_instance",
                          "/cluster/procs_per_instance", "/cluster/bind_gpus", "/batch/per_replica", "/batch/global",
                          "/batch/micro_batches", "/batch/dataset_size", "/batch/epochs", "/rendezvous/endpoint",
                          "/rendezvous/join_timeout_s", "/rendezvous/heartbeat_s", "/rendezvous/heartbeat_timeout_s",
                          "/rendezvous/token_file", "/rendezvous/run_id", "/restart/max_restarts", "/restart/backoff_s",
                          "/env", "/output/tag", "/output/tag_format", "/output/timestamps", "/output/log_dir", "/grace_s",
                          "/max_runtime_s"})
      CHECK_MESSAGE(find_field(p) != nullptr, p);
  }

  TEST_CASE("names and expectations read well") {
    CHECK(dotted_name("/cluster/instances") == "cluster.instances");
    CHECK(expectation(*find_field("/cluster/instances")) ==
          "an integer from 1 to 65536, or {\"min\": A, \"max\": B} with A <= B in that range");
    CHECK(expectation(*find_field("/version")) == "an integer 1");
    CHECK(expectation(*find_field("/rendezvous/heartbeat_s")).rfind("a number > 0", 0) == 0);
    CHECK(expectation(*find_field("/cluster/gpus_per_instance")).rfind("\"auto\" or an integer", 0) == 0);
    CHECK(std::string(type_name(FieldType::string_list)) == "array of strings");
  }
}
