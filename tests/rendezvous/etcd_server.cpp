#include "etcd_server.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_needs.hpp"

namespace etcdtest {
namespace {

// --need=etcd: what the etcd tests start and call (etcd, etcdctl, the openssl CLI for TLS).
std::string etcd_missing() {
  std::string missing;
  for (const char* bin : {ETCD_BIN, ETCDCTL_BIN})
    if (::access(bin, X_OK) != 0) missing += std::string(missing.empty() ? "" : ", ") + bin;
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) missing += std::string(missing.empty() ? "" : ", ") + "openssl";
  if (missing.empty()) return {};
  return "not installed: " + missing + " (scripts/install-deps.sh installs etcd-server, etcd-client and openssl)";
}
const dtrain::test::Need need_etcd("etcd", etcd_missing);

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A port that was free a moment ago on 127.0.0.1 (etcd binds it next; start() retries a clash).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command line, its output appended to `log`; true when it exits 0.
bool shell(const std::string& line, const std::string& log) {
  return std::system((line + " >>" + log + " 2>&1").c_str()) == 0;
}

std::size_t collect(char* data, std::size_t size, std::size_t n, void* body) {
  static_cast<std::string*>(body)->append(data, size * n);
  return size * n;
}

}  // namespace

EtcdServer::EtcdServer(EtcdServerOptions o) : opts_(std::move(o)) {
  if (::access(ETCD_BIN, X_OK) != 0) {
    error_ = std::string("etcd is not installed (") + ETCD_BIN +
                   " not found; scripts/install-deps.sh installs Debian's etcd-server)";
    return;
  }
  char tmpl[] = "/tmp/dtrain-etcd-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    error_ = "cannot make a temporary directory under /tmp";
    return;
  }
  dir_ = tmpl;
  if (opts_.tls && !make_certificates()) return;
  for (int attempt = 0; attempt < 3; ++attempt) {  // a port taken in between: again with others
    client_port_ = free_port();
    peer_port_ = free_port();
    if (start()) return;
    if (log_tail().find("address already in use") == std::string::npos) return;
    error_.clear();
    std::error_code ec;
    fs::remove_all(dir_ + "/data", ec);
  }
}

EtcdServer::~EtcdServer() {
  kill();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::string EtcdServer::endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
std::string EtcdServer::url() const { return (opts_.tls ? "https://" : "http://") + endpoint(); }

dtrain::etcd::Options EtcdServer::options() const {
  dtrain::etcd::Options o;
  o.endpoint = url();
  if (opts_.tls) {
    o.cacert = ca_file();
    o.cert = cert_file();
    o.key = key_file();
  }
  o.connect_timeout = 5000ms;
  o.request_timeout = 10000ms;
  return o;
}

bool EtcdServer::make_certificates() {
  const std::string log = dir_ + "/openssl.log";
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  auto in_dir = [&](const std::string& cmd) { return shell("cd " + dir_ + " && " + cmd, log); };
  // The server certificate serves as a client certificate too: etcd's gateway dials etcd with it.
  bool ok = in_dir("openssl req -x509 -new " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=dtrain-test-ca") &&
            in_dir("printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > server.ext") &&
            in_dir("openssl req -new " + ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1") &&
            in_dir("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
                   "-extfile server.ext -out server.crt") &&
            in_dir("printf 'extendedKeyUsage=clientAuth\\n' > client.ext") &&
            in_dir("openssl req -new " + ec + " -keyout client.key -out client.csr -subj /CN=root") &&
            in_dir("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
                   "-extfile client.ext -out client.crt");
  if (!ok) error_ = "the openssl CLI could not make test certificates: " + read_file(log).substr(0, 500);
  return ok;
}

std::string EtcdServer::other_ca() {
  const std::string path = dir_ + "/other-ca.crt";
  bool ok = shell("cd " + dir_ + " && openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " +
                      "-keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=another-ca",
                  dir_ + "/openssl.log");
  REQUIRE_MESSAGE(ok, read_file(dir_ + "/openssl.log"));
  return path;
}

std::vector<std::string> EtcdServer::args() const {
  std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> a{ETCD_BIN,
                             "--name=test",
                             "--data-dir=" + dir_ + "/data",
                             "--listen-client-urls=" + url(),
                             "--advertise-client-urls=" + url(),
                             "--listen-peer-urls=" + peer,
                             "--initial-advertise-peer-urls=" + peer,
                             "--initial-cluster=test=" + peer,
                             "--initial-cluster-state=new",
                             "--log-level=warn",
                             "--logger=zap"};
  if (opts_.tls) {
    a.insert(a.end(), {"--cert-file=" + dir_ + "/server.crt", "--key-file=" + dir_ + "/server.key",
                       "--trusted-ca-file=" + ca_file(), "--client-cert-auth"});
  }
  a.insert(a.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  return a;
}

bool EtcdServer::start() {
  auto a = args();
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string log = dir_ + "/etcd.log";
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    error_ = "fork failed";
    return false;
  }
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return wait_healthy();
}

bool EtcdServer::wait_healthy() {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  CURL* h = curl_easy_init();
  std::string body;
  std::string health = url() + "/health";
  curl_easy_setopt(h, CURLOPT_URL, health.c_str());
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  std::string ca = ca_file(), cert = cert_file(), key = key_file();
  if (opts_.tls) {
    curl_easy_setopt(h, CURLOPT_CAINFO, ca.c_str());
    curl_easy_setopt(h, CURLOPT_SSLCERT, cert.c_str());
    curl_easy_setopt(h, CURLOPT_SSLKEY, key.c_str());
  }
  bool healthy = false;
  while (!healthy && std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    body.clear();
    healthy = curl_easy_perform(h) == CURLE_OK && body.find("\"true\"") != std::string::npos;
    if (!healthy) std::this_thread::sleep_for(50ms);
  }
  curl_easy_cleanup(h);
  if (!healthy) {
    error_ = "etcd did not start (" + std::string(pid_ < 0 ? "it exited" : "no healthy answer within 30 s") +
                   "); its log ends with: " + log_tail(800);
    kill();
  }
  return healthy;
}

void EtcdServer::enable_auth(const std::string& password) {
  std::string out;
  REQUIRE_MESSAGE(etcdctl("user add root --new-user-password=" + password + " --interactive=false", &out) == 0, out);
  REQUIRE_MESSAGE(etcdctl("user grant-role root root", &out) == 0, out);
  REQUIRE_MESSAGE(etcdctl("auth enable", &out) == 0, out);
  root_password_ = password;
}

int EtcdServer::etcdctl(const std::string& args, std::string* out) const {
  std::string line = std::string("ETCDCTL_API=3 ") + ETCDCTL_BIN + " --endpoints=" + url() + " --dial-timeout=5s";
  if (opts_.tls) line += " --cacert=" + ca_file() + " --cert=" + cert_file() + " --key=" + key_file();
  if (!root_password_.empty()) line += " --user=root:" + root_password_;
  line += " " + args + " 2>&1";
  FILE* p = ::popen(line.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int st = ::pclose(p);
  if (out != nullptr) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void EtcdServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

bool EtcdServer::restart() {
  kill();
  error_.clear();
  return start();
}

std::string EtcdServer::log_tail(std::size_t bytes) const {
  std::string text = read_file(dir_ + "/etcd.log");
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

EtcdServer& shared_etcd() {
  static EtcdServer server;
  return server;
}

std::string unique_prefix() {
  static std::atomic<int> n{0};
  return "/t/" + std::to_string(++n) + "/";
}

}  // namespace etcdtest
