// What a Client's session carries to a real etcd: TLS with a client certificate (and the refusals
// of a wrong CA or a missing certificate), etcd's user/password authentication, and a token that
// expires and is fetched again.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "client.hpp"
#include "dtrain/common/errors.hpp"
#include "etcd_server.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using etcdtest::EtcdServer;
using etcdtest::EtcdServerOptions;

TEST_SUITE("etcd::client") {
  TEST_CASE("TLS with a client certificate; a wrong CA and a missing certificate are refused") {
    EtcdServer etcd(EtcdServerOptions{.tls = true, .extra_args = {}});
    REQUIRE_ETCD(etcd);
    Client c(etcd.options());
    CHECK(c.url().rfind("https://", 0) == 0);
    std::int64_t rev = c.put("/tls", "yes");
    CHECK(c.range("/tls").kvs.at(0).value == "yes");
    Watch w(c, "/tls", "", rev);
    CHECK(w.next(5s).at(0).kv.value == "yes");

    auto wrong_ca = etcd.options();
    wrong_ca.cacert = etcd.other_ca();
    CHECK_THROWS_WITH_AS(Client(wrong_ca).range("/tls"), doctest::Contains("TLS handshake failed"), dtrain::AuthError);
    CHECK_THROWS_AS(Watch(wrong_ca, "/tls", "", 0), dtrain::AuthError);

    auto no_cert = etcd.options();
    no_cert.cert.clear();
    no_cert.key.clear();
    CHECK_THROWS_WITH_AS(Client(no_cert).range("/tls"), doctest::Contains("etcd refused us"), dtrain::AuthError);

    auto plain = etcd.options();
    plain.endpoint = etcd.endpoint();  // http to an https etcd
    plain.cacert = plain.cert = plain.key = "";
    CHECK_THROWS_WITH_AS(Client(plain).range("/tls"), doctest::Contains("write the endpoint as https://"), dtrain::IoError);
  }

  TEST_CASE("etcd authentication: the user's token on every call and watch; a wrong password is AuthError") {
    EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    auto o = etcd.options();
    o.user = "root";
    o.password = "right";
    Client before(o);
    CHECK_THROWS_WITH_AS(before.range("/k"), doctest::Contains("does not have authentication enabled"), dtrain::AuthError);

    etcd.enable_auth("right");
    Client c(o);
    std::int64_t rev = c.put("/k", "v");
    CHECK(c.range("/k").kvs.at(0).value == "v");
    Watch through_client(c, "/k", "", rev);
    CHECK(through_client.next(5s).at(0).kv.value == "v");
    Watch own(o, "/k", "", rev);  // authenticates by itself
    CHECK(own.next(5s).at(0).kv.value == "v");

    auto wrong = o;
    wrong.password = "wrong";
    CHECK_THROWS_WITH_AS(Client(wrong).range("/k"), doctest::Contains("refused user 'root'"), dtrain::AuthError);
    CHECK_THROWS_AS(Watch(wrong, "/k", "", 0), dtrain::AuthError);
    auto nobody = etcd.options();
    CHECK_THROWS_WITH_AS(Client(nobody).put("/k", "v"), doctest::Contains("user name is empty"), dtrain::AuthError);
    CHECK_THROWS_AS(Watch(nobody, "/k", "", 0), dtrain::AuthError);
  }

  TEST_CASE("an expired token is fetched again") {
    EtcdServer etcd(EtcdServerOptions{.tls = false, .extra_args = {"--auth-token-ttl=1"}});
    REQUIRE_ETCD(etcd);
    etcd.enable_auth("pw");
    auto o = etcd.options();
    o.user = "root";
    o.password = "pw";
    Client c(o);
    std::int64_t rev = c.put("/k", "1");
    std::this_thread::sleep_for(2500ms);  // past the 1 s TTL: etcd forgot the token
    CHECK(c.range("/k").kvs.at(0).value == "1");
    std::this_thread::sleep_for(2500ms);
    Watch w(c, "/k", "", rev);
    CHECK(w.next(5s).size() == 1);
  }
}
