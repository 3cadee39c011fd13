#include "harness/hub_download.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/folder.h"
#include "base/sha.h"
#include "base/text.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

// What the mock Hub's resolve URLs name (PercentEncode's inverse).
std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A file the mock Hub serves.
struct MockFile {
  std::string content;
  bool lfs = false;       // listed with an lfs.oid (sha256)
  bool redirect = false;  // resolve answers 302 to another URL, like the Hub's LFS CDN
  std::string listed_digest;  // "" lists the true digest; otherwise this one (a corrupt listing)
};

// A small HTTP/1.1 server on 127.0.0.1 (an ephemeral port) serving one repo, "org/tiny" at revision "main",
// as the Hub does: the tree listing, resolve URLs (with redirects), Range requests. One connection at a time,
// each closed after its response.
class MockHub {
 public:
  MockHub() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 16);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~MockHub() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  MockHub(const MockHub&) = delete;
  MockHub& operator=(const MockHub&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Configuration: set before a download starts.
  std::map<std::string, MockFile> files;
  std::vector<std::string> extra_listed_paths;  // listed as files (unsafe names) but never served
  std::string required_token;                   // non-empty: 401 unless "Authorization: Bearer <it>"
  std::string cut_path;                         // this file's next response stops after cut_after bytes
  size_t cut_after = 0;
  bool ignore_range = false;
  // Called with each request's target once it is read, before the answer (a hostile neighbour's moment).
  std::function<void(const std::string& target)> on_request;
  std::string link_next;                           // the listing's `Link: <it>; rel="next"` header ("" sends none)
  std::string redirect_to;                         // where redirected files go ("" is this Hub's own /lfs-store/)
  std::map<std::string, std::string> serve_extra;  // bytes served after a file's listed content
  bool endless_pages = false;                      // every listing page links to another ("...&p", "...&p&p", ...)
  std::string raw_listing;                         // served as the listing instead of Listing() when non-empty
  size_t header_flood = 0;                         // bytes of extra headers sent with the listing
  std::map<std::string, int> fail_503;             // request target -> how many more times it answers 503
  std::string stall_path;  // this file's next response stalls after stall_after bytes for stall_s
  size_t stall_after = 0;
  double stall_s = 0;
  bool dataset = false;  // serves org/tiny as a dataset repo (/api/datasets/..., /datasets/org/tiny/...)

  // "<target> [range]" per request served, and the Authorization headers seen.
  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> Authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }
  void ClearRequests() {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.clear();
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      Handle(c);
      close(c);
    }
  }

  static void Send(int c, const std::string& s) {
    size_t sent = 0;
    while (sent < s.size()) {
      ssize_t n = send(c, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  static void Respond(int c, int status, const std::string& reason, const std::string& body,
                      const std::string& headers = "") {
    Send(c, "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n" + headers + "\r\n" + body);
  }

  std::string Listing() {
    nlohmann::json j = nlohmann::json::array();
    j.push_back({{"type", "directory"}, {"oid", std::string(40, '0')}, {"size", 0}, {"path", "original"}});
    for (const auto& [path, f] : files) {
      nlohmann::json e = {{"type", "file"}, {"size", f.content.size()}, {"path", path}};
      if (f.lfs) {
        Sha256 sha;
        sha.Update(f.content);
        std::string pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + sha.HexDigest() + "\n";
        e["oid"] = GitBlobSha1(pointer);
        e["lfs"] = {{"oid", f.listed_digest.empty() ? sha.HexDigest() : f.listed_digest},
                    {"size", f.content.size()},
                    {"pointerSize", pointer.size()}};
      } else {
        e["oid"] = f.listed_digest.empty() ? GitBlobSha1(f.content) : f.listed_digest;
      }
      j.push_back(e);
    }
    for (const std::string& p : extra_listed_paths) {
      j.push_back({{"type", "file"}, {"oid", std::string(40, 'a')}, {"size", 1}, {"path", p}});
    }
    return j.dump();
  }

  void ServeListing(int c, const std::string& target, bool authorized) {
    if (!authorized) return Respond(c, 401, "Unauthorized", R"({"error":"Invalid credentials"})");
    const std::string listing =
        std::string(dataset ? "/api/datasets" : "/api/models") + "/org/tiny/tree/main?recursive=true";
    if (target != listing && !(endless_pages && target.rfind(listing, 0) == 0)) {
      return Respond(c, 404, "Not Found", R"({"error":"Repository not found"})");
    }
    std::string headers = "Content-Type: application/json\r\n";
    std::string next = endless_pages ? endpoint() + target + "&p" : link_next;
    if (!next.empty()) headers += "Link: <" + next + ">; rel=\"next\"\r\n";
    for (size_t i = 0; headers.size() < header_flood; ++i)
      headers += "X-Flood-" + std::to_string(i) + ": " + std::string(1000, 'f') + "\r\n";
    return Respond(c, 200, "OK", raw_listing.empty() ? Listing() : raw_listing, headers);
  }

  void Handle(int c) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    std::istringstream lines(request);
    std::string method, target, line;
    lines >> method >> target;
    std::getline(lines, line);
    std::string range, authorization;
    while (std::getline(lines, line) && line != "\r") {
      std::string name = line.substr(0, line.find(':'));
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string value = line.find(':') == std::string::npos ? "" : line.substr(line.find(':') + 2);
      if (!value.empty() && value.back() == '\r') value.pop_back();
      if (name == "range") range = value;
      if (name == "authorization") authorization = value;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(target + (range.empty() ? "" : " " + range));
      if (!authorization.empty()) authorizations_.push_back(authorization);
    }
    if (on_request) on_request(target);
    if (fail_503[target] > 0) {
      --fail_503[target];
      return Respond(c, 503, "Service Unavailable", "busy");
    }
    const std::string api = "/api/", store = "/lfs-store/";
    const std::string resolve = std::string(dataset ? "/datasets" : "") + "/org/tiny/resolve/main/";
    bool authorized = required_token.empty() || authorization == "Bearer " + required_token;
    if (target.rfind(api, 0) == 0) return ServeListing(c, target, authorized);
    std::string path;
    if (target.rfind(resolve, 0) == 0) {
      if (!authorized) return Respond(c, 401, "Unauthorized", "");
      path = PercentDecode(target.substr(resolve.size()));
      auto f = files.find(path);
      if (f != files.end() && f->second.redirect) {
        return Respond(c, 302, "Found", "",
                       "Location: " + (redirect_to.empty() ? endpoint() : redirect_to) + store +
                           target.substr(resolve.size()) + "\r\n");
      }
    } else if (target.rfind(store, 0) == 0) {
      path = PercentDecode(target.substr(store.size()));
    }
    auto f = files.find(path);
    if (f == files.end()) return Respond(c, 404, "Not Found", "Entry not found");
    const std::string content = f->second.content + serve_extra[path];
    size_t from = 0;
    if (!range.empty() && !ignore_range) {
      from = std::stoul(range.substr(range.find('=') + 1));
      if (from >= content.size()) return Respond(c, 416, "Range Not Satisfiable", "");
    }
    std::string body = content.substr(from);
    std::string head = from > 0 || (!range.empty() && !ignore_range)
                           ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(from) + "-" +
                                 std::to_string(content.size() - 1) + "/" + std::to_string(content.size()) + "\r\n"
                           : "HTTP/1.1 200 OK\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    if (path == cut_path) {
      cut_path.clear();
      Send(c, head + body.substr(0, cut_after));  // then the connection closes: a cut transfer
      return;
    }
    if (path == stall_path) {
      stall_path.clear();
      Send(c, head + body.substr(0, stall_after));
      for (auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(stall_s);
           !stop_ && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return;
    }
    Send(c, head + body);
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_, authorizations_;
};

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

void RemoveTree(const std::string& path) { nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

std::string Bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 7);
  return s;
}

std::string Read(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  return text.ok() ? *text : "<unreadable: " + text.status().message() + ">";
}

class HubDownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_.files["config.json"] = MockFile{R"({"model_type": "llama"})" "\n", false, false, ""};
    hub_.files["model.safetensors"] = MockFile{Bytes(300000, 1), true, true, ""};
    hub_.files["original/tokenizer.model"] = MockFile{Bytes(5000, 2), true, false, ""};
    options_.repo_id = "org/tiny";
    options_.endpoint = hub_.endpoint();
    options_.output_dir = dir_.path() + "/tiny";
    options_.progress = &progress_;
    options_.retry_initial_s = 0.01;
  }

  StatusOr<HubDownloadResult> Download() {
    std::unique_ptr<HttpTransport> transport = MakeCurlTransport();
    return DownloadHubRepo(options_, *transport);
  }

  std::string Out(const std::string& path) const { return options_.output_dir + "/" + path; }

  MockHub hub_;
  test::ScratchDir dir_{"hub_download_test"};
  HubDownloadOptions options_;
  std::ostringstream progress_;
};

TEST_F(HubDownloadTest, FetchesTheWholeRepoWithItsLayout) {
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->downloaded, (std::vector<std::string>{"config.json", "model.safetensors", "original/tokenizer.model"}));
  for (const auto& [path, f] : hub_.files) {
    EXPECT_EQ(Read(Out(path)), f.content) << path;
    EXPECT_FALSE(PathExists(Out(path) + ".incomplete")) << path;
  }
  std::vector<std::string> requests = hub_.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(), "/lfs-store/model.safetensors"), requests.end())
      << "the 302 to the LFS store was followed";
  EXPECT_NE(progress_.str().find("model.safetensors: 292.97 KiB / 292.97 KiB (100%)"), std::string::npos)
      << progress_.str();
  EXPECT_EQ(progress_.str().find('\r'), std::string::npos) << "no terminal, no carriage returns";
  EXPECT_EQ(progress_.str().find('\x1b'), std::string::npos);
}

TEST_F(HubDownloadTest, IgnorePatternsSkipFiles) {
  options_.ignore_patterns = {"*.safetensors", "original/"};
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->downloaded, std::vector<std::string>{"config.json"});
  EXPECT_EQ(r->ignored, (std::vector<std::string>{"model.safetensors", "original/tokenizer.model"}));
  EXPECT_FALSE(PathExists(Out("model.safetensors")));
  EXPECT_FALSE(PathExists(Out("original")));
}

TEST_F(HubDownloadTest, ACutTransferResumesWithARangeRequest) {
  options_.retries = 0;  // the next run resumes (with retries, this one does: TransientFailuresAreRetried...)
  hub_.cut_path = "model.safetensors";
  hub_.cut_after = 100000;
  StatusOr<HubDownloadResult> first = Download();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Status::Code::kIoError);
  const std::string& message = first.status().message();
  EXPECT_NE(message.find("model.safetensors: network error: " + hub_.endpoint() + "/org/tiny/resolve/main/model.safetensors"),
            std::string::npos) << message;
  EXPECT_NE(message.find("re-run the same command to resume"), std::string::npos) << message;
  EXPECT_FALSE(PathExists(Out("model.safetensors"))) << "nothing half-written under the final name";
  EXPECT_EQ(Read(Out("model.safetensors.incomplete")), hub_.files["model.safetensors"].content.substr(0, 100000));

  hub_.ClearRequests();
  StatusOr<HubDownloadResult> second = Download();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::vector<std::string> requests = hub_.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(), "/lfs-store/model.safetensors bytes=100000-"), requests.end())
      << "requests: " << ::testing::PrintToString(requests);
  EXPECT_EQ(Read(Out("model.safetensors")), hub_.files["model.safetensors"].content);
  EXPECT_FALSE(PathExists(Out("model.safetensors.incomplete")));
  EXPECT_EQ(second->skipped, std::vector<std::string>{"config.json"}) << "fetched before the cut";
}

TEST_F(HubDownloadTest, AServerIgnoringRangeMakesItStartOver) {
  ASSERT_TRUE(MakeDirs(options_.output_dir + "/original").ok());
  const std::string& content = hub_.files["original/tokenizer.model"].content;
  ASSERT_TRUE(WriteFileAtomically(Out("original/tokenizer.model.incomplete"), content.substr(0, 1000)).ok());
  hub_.ignore_range = true;
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read(Out("original/tokenizer.model")), content);
  std::vector<std::string> requests = hub_.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(), "/org/tiny/resolve/main/original/tokenizer.model bytes=1000-"),
            requests.end()) << ::testing::PrintToString(requests);
}

TEST_F(HubDownloadTest, ABadChecksumIsRejected) {
  struct Case {
    std::string path, kind;
  };
  for (const Case& c : {Case{"original/tokenizer.model", "sha256"}, Case{"config.json", "git blob sha1"}}) {
    SCOPED_TRACE(c.path);
    options_.output_dir = dir_.path() + "/" + c.kind;
    MockFile& f = hub_.files[c.path];
    std::string wrong = std::string(c.kind == "sha256" ? 64 : 40, 'e');
    f.listed_digest = wrong;
    StatusOr<HubDownloadResult> r = Download();
    f.listed_digest.clear();
    ASSERT_FALSE(r.ok());
    std::string actual;
    if (c.kind == "sha256") {
      Sha256 sha;
      sha.Update(f.content);
      actual = sha.HexDigest();
    } else {
      actual = GitBlobSha1(f.content);
    }
    EXPECT_EQ(r.status().message(), c.path + ": checksum mismatch: the Hub lists " + c.kind + " " + wrong +
                                         " but the bytes downloaded have " + actual +
                                         "; the download was deleted; fix: re-run the command to fetch it again (if "
                                         "it fails again, something between here and the Hub alters the file)");
    EXPECT_EQ(r.status().ExitCode(), 1);
    EXPECT_FALSE(PathExists(Out(c.path)));
    EXPECT_FALSE(PathExists(Out(c.path) + ".incomplete"));
  }
}

TEST_F(HubDownloadTest, UnauthorizedWithAndWithoutAToken) {
  hub_.required_token = "hf_right";
  StatusOr<HubDownloadResult> none = Download();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().ExitCode(), 2);
  EXPECT_NE(none.status().message().find("without a token (HTTP 401): org/tiny is gated or private"), std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("--hf-token <token> or in the environment variable HF_TOKEN"),
            std::string::npos);

  options_.token = "hf_wrong_secret";
  StatusOr<HubDownloadResult> wrong = Download();
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("with the token given (HTTP 401)"), std::string::npos)
      << wrong.status().message();
  EXPECT_EQ(wrong.status().message().find("hf_wrong_secret"), std::string::npos) << "the token is never printed";
  EXPECT_FALSE(PathExists(options_.output_dir)) << "nothing written";

  options_.token = "hf_right";
  StatusOr<HubDownloadResult> right = Download();
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ(right->downloaded.size(), 3u);
  std::vector<std::string> seen = hub_.Authorizations();
  EXPECT_NE(std::find(seen.begin(), seen.end(), "Bearer hf_right"), seen.end());
}

TEST_F(HubDownloadTest, UnsafePathsInTheListingAreRefused) {
  for (const char* bad : {"../escape.txt", "/etc/passwd", "a/../../b", "a//b", "./c", "d\\e"}) {
    SCOPED_TRACE(bad);
    hub_.extra_listed_paths = {bad};
    StatusOr<HubDownloadResult> r = Download();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("org/tiny: the Hub's file listing names '" + TerminalText(bad) + "'"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("refused, nothing downloaded"), std::string::npos);
    EXPECT_FALSE(PathExists(options_.output_dir)) << "checked before anything is written";
    EXPECT_FALSE(PathExists(dir_.path() + "/escape.txt"));
  }
}

// A listing naming .git/config, downloaded into a git working tree, would replace that file and run its
// core.fsmonitor command on the next `git status`: refused before anything is written.
TEST_F(HubDownloadTest, GitControlPathsAreRefusedBeforeAnythingIsWritten) {
  ASSERT_TRUE(MakeDirs(options_.output_dir + "/.git").ok());
  ASSERT_TRUE(WriteFileAtomically(Out(".git/config"), "[core]\n\tbare = false\n").ok());
  for (const char* bad : {".git/config", ".GIT/config", "sub/.git/hooks/post-checkout"}) {
    SCOPED_TRACE(bad);
    hub_.extra_listed_paths = {bad};
    StatusOr<HubDownloadResult> r = Download();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("org/tiny: the Hub's file listing names '" + std::string(bad) + "'"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("', which lies in git's control folder ("), std::string::npos)
        << r.status().message();
    EXPECT_EQ(Read(Out(".git/config")), "[core]\n\tbare = false\n");
    EXPECT_FALSE(PathExists(Out("config.json"))) << "checked before anything is written";
    EXPECT_FALSE(PathExists(Out("sub")));
  }
}

// Links a neighbour planted in the output folder (or a folder above a file) are never written through, reused
// or kept: each case is refused with a message naming the link, and the file outside is untouched.
TEST_F(HubDownloadTest, LinksPlantedInTheFolderAreNeverFollowed) {
  hub_.files["nested/deeper/x.bin"] = MockFile{"x", false, false, ""};
  const std::string outside = dir_.path() + "/outside";
  struct Case {
    std::string name, plant, link_target_content;  // plant: the path made a link to `outside/victim...`
    bool folder;                                   // link to the folder `outside` rather than a file there
    std::string refused_at;                        // the path the message names
  } cases[] = {
      {"a folder of a file", "original", "", true, "original"},
      {"a folder above folders to make", "nested", "", true, "nested"},
      {"a partial file", "model.safetensors.incomplete", "precious", false, "model.safetensors.incomplete"},
      {"a complete-looking final file", "config.json", hub_.files["config.json"].content, false, "config.json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    options_.output_dir = dir_.path() + "/out_" + std::to_string(&c - cases);
    ASSERT_TRUE(MakeDirs(ParentDir(Out(c.plant))).ok());
    ASSERT_TRUE(MakeDirs(outside + "/" + c.name).ok());
    const std::string victim = outside + "/" + c.name + (c.folder ? "" : "/victim");
    if (!c.folder) ASSERT_TRUE(WriteFileAtomically(victim, c.link_target_content).ok());
    ASSERT_EQ(symlink(victim.c_str(), Out(c.plant).c_str()), 0);
    StatusOr<HubDownloadResult> r = Download();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(
        r.status().message(),
        Out(c.refused_at) + ": is a symbolic link (to " + victim +
            "); a download never writes through a link in "
            "its folder nor keeps one in a file's place; refused, nothing written there; fix: remove the link (or "
            "choose another --output-dir)");
    EXPECT_EQ(r.status().ExitCode(), 2);
    if (c.folder) {
      StatusOr<std::vector<std::string>> there = ListRegularFiles(victim, "", nullptr);
      EXPECT_TRUE(there.ok() && there->empty()) << ::testing::PrintToString(*there);
      EXPECT_FALSE(PathExists(victim + "/deeper")) << "no folder made through the link";
    } else {
      EXPECT_EQ(Read(victim), c.link_target_content);
    }
    EXPECT_FALSE(PathExists(Out("model.safetensors"))) << "refused before anything is written";
  }
}

// The same links planted while the download runs (after its first checks) are refused as each file is reached.
TEST_F(HubDownloadTest, ALinkPlantedDuringTheDownloadIsRefused) {
  const std::string outside = dir_.path() + "/outside";
  ASSERT_TRUE(MakeDirs(outside).ok());
  hub_.on_request = [&](const std::string& target) {
    if (target == "/org/tiny/resolve/main/model.safetensors") symlink(outside.c_str(), Out("original").c_str());
  };
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(Out("original") + ": is a symbolic link (to " + outside + ")"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(PathExists(outside + "/tokenizer.model"));
  EXPECT_FALSE(PathExists(outside + "/tokenizer.model.incomplete"));
}

// A partial file this download did not make is never resumed: another name for another file's bytes (a hard
// link), or a FIFO (which must not block the download either).
TEST_F(HubDownloadTest, APartialFileNotSolelyThisUsersIsNotResumed) {
  const std::string victim = dir_.path() + "/victim";
  ASSERT_TRUE(WriteFileAtomically(victim, "precious").ok());
  ASSERT_TRUE(MakeDirs(options_.output_dir).ok());
  ASSERT_EQ(link(victim.c_str(), Out("model.safetensors.incomplete").c_str()), 0);
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), Out("model.safetensors.incomplete") +
                                      ": a partial download that has 2 names (hard links): its bytes are also another "
                                      "file's; resuming it would write into a file this download did not make; "
                                      "refused; fix: remove it and run again");
  EXPECT_EQ(Read(victim), "precious");

  ASSERT_EQ(unlink(Out("model.safetensors.incomplete").c_str()), 0);
  ASSERT_EQ(mkfifo(Out("model.safetensors.incomplete").c_str(), 0600), 0);
  r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), Out("model.safetensors.incomplete") +
                                      ": is a FIFO, not a regular file; refused, nothing written there; fix: remove it "
                                      "(or choose another --output-dir)");
}

// Two downloads into one folder would share their partial files: the second is refused, naming the folder.
TEST_F(HubDownloadTest, ASecondDownloadIntoTheSameFolderIsRefused) {
  ASSERT_TRUE(MakeDirs(options_.output_dir).ok());
  int held = open(options_.output_dir.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX | LOCK_NB), 0);  // what the first download holds
  StatusOr<HubDownloadResult> r = Download();
  close(held);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(r.status().message(),
            options_.output_dir +
                ": another download is writing into this folder (it holds the folder's lock); two "
                "downloads into one folder would write the same partial files; nothing written; fix: wait for it to "
                "finish and run this again (complete files are skipped), or choose another --output-dir");
  EXPECT_EQ(hub_.Requests(), std::vector<std::string>{"/api/models/org/tiny/tree/main?recursive=true"});
  ASSERT_TRUE(Download().ok()) << "the lock is the folder's, released with its holder";
}

// `owner/.` named the folder /tmp/. (torchtune's default /tmp/<name>), so the repo went straight into /tmp.
TEST_F(HubDownloadTest, RepoIdsTheHubRefusesAreRefusedBeforeAnyRequest) {
  for (const char* bad : {"org/.", "org/..", ".", "org/.git/x"}) {
    options_.repo_id = bad;
    options_.output_dir.clear();
    StatusOr<HubDownloadResult> r = Download();
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("'" + std::string(bad) + "' is not a Hub repo id: ", 0), 0u)
        << r.status().message();
  }
  EXPECT_TRUE(hub_.Requests().empty());
}

// The checkout's built-in configs and recorded results are never a download's folder, however it is named.
TEST_F(HubDownloadTest, TheCheckoutsConfigsAndReportsAreRefused) {
  const std::string checkout = TM_SOURCE_DIR;
  const std::string link = dir_.path() + "/reports_link";
  ASSERT_EQ(symlink((checkout + "/reports").c_str(), link.c_str()), 0);
  struct Case {
    std::string output_dir, inside;
    std::vector<std::string> made;  // what a download there would create in the checkout
  } cases[] = {
      {checkout + "/configs",
       checkout + "/configs",
       {checkout + "/configs/config.json", checkout + "/configs/model.safetensors", checkout + "/configs/original"}},
      {checkout + "/configs/hub_download_test_x", checkout + "/configs", {checkout + "/configs/hub_download_test_x"}},
      {checkout + "/recipes/../configs/hub_download_test_z",
       checkout + "/configs",
       {checkout + "/configs/hub_download_test_z"}},
      {link + "/hub_download_test_y", checkout + "/reports", {checkout + "/reports/hub_download_test_y"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.output_dir);
    options_.output_dir = c.output_dir;
    StatusOr<HubDownloadResult> r = Download();
    for (const std::string& made : c.made) {
      EXPECT_FALSE(PathExists(made));
      RemoveTree(made);  // should a failing check have written there
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("--output-dir " + c.output_dir + ": lies inside " + c.inside, 0), 0u)
        << r.status().message();
    EXPECT_NE(r.status().message().find("nothing written; fix: choose a folder outside the checkout's configs/ and "
                                        "reports/"),
              std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(hub_.Requests().empty());
  options_.output_dir = dir_.path() + "/fine";
  EXPECT_TRUE(Download().ok());
}

// The token goes to HF_ENDPOINT's own scheme, host and port only: not to a listing page on another origin
// (its Link header names any URL it likes), nor to where a file redirects (another port here).
TEST_F(HubDownloadTest, TheTokenGoesOnlyToTheEndpointsOrigin) {
  MockHub other;
  other.files["model.safetensors"] = hub_.files["model.safetensors"];
  other.files.erase("config.json");
  hub_.link_next = other.endpoint() + "/api/models/org/tiny/tree/main?recursive=true";
  hub_.redirect_to = other.endpoint();
  options_.token = "hf_only_for_the_hub";
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read(Out("model.safetensors")), hub_.files["model.safetensors"].content);
  std::vector<std::string> asked = other.Requests();
  EXPECT_NE(std::find(asked.begin(), asked.end(), "/api/models/org/tiny/tree/main?recursive=true"), asked.end())
      << "the second page was read: " << ::testing::PrintToString(asked);
  EXPECT_NE(std::find(asked.begin(), asked.end(), "/lfs-store/model.safetensors"), asked.end());
  EXPECT_EQ(other.Authorizations(), std::vector<std::string>{}) << "no token to another origin";
  EXPECT_FALSE(hub_.Authorizations().empty()) << "the Hub itself gets it";
}

// A listing's names reach the terminal escaped: no escape sequence, bell or line break of theirs.
TEST_F(HubDownloadTest, NamesWithControlCharactersAreShownEscaped) {
  hub_.files = {{"evil\x1b]0;owned\x07.txt", MockFile{"a", false, false, ""}},
                {"two\nlines.txt", MockFile{"b", false, false, ""}},
                {"c1\xc2\x9b"
                 "31m.txt",
                 MockFile{"c", false, false, ""}}};
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read(Out("two\nlines.txt")), "b") << "stored under its own name";
  const std::string shown = progress_.str();
  for (const char* raw : {"\x1b", "\x07", "\xc2\x9b", "two\nlines"})
    EXPECT_EQ(shown.find(raw), std::string::npos) << shown;
  EXPECT_NE(shown.find("evil\\x1b]0;owned\\x07.txt: "), std::string::npos) << shown;
  EXPECT_NE(shown.find("two\\nlines.txt: "), std::string::npos) << shown;
  EXPECT_NE(shown.find("c1\\u009b31m.txt: "), std::string::npos) << shown;

  hub_.extra_listed_paths = {".git/\x1b[2J"};
  r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("names '.git/\\x1b[2J'"), std::string::npos) << r.status().message();
}

// A file served longer than its listed size is stopped at that size (a 1 MiB file once filled a disk).
TEST_F(HubDownloadTest, ABodyLongerThanItsListedSizeIsCutThereAndRefused) {
  hub_.serve_extra["model.safetensors"] = std::string(5 << 20, 'x');
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "model.safetensors: the Hub sent more than the 300000 bytes (292.97 KiB) its listing gives for this file "
            "(the bound on its download); stopped there, nothing beyond written, and the download was deleted; fix: "
            "re-run the command (if it happens again, the Hub or something between serves another file than it "
            "lists)");
  EXPECT_FALSE(PathExists(Out("model.safetensors")));
  EXPECT_FALSE(PathExists(Out("model.safetensors.incomplete")));
}

// A listing that never ends, or is too large or too deep, ends with an error naming the bound it broke, before
// anything is written (a self-linking listing of large pages used to die of std::bad_alloc).
TEST_F(HubDownloadTest, ListingsAreBounded) {
  const std::string first = hub_.endpoint() + "/api/models/org/tiny/tree/main?recursive=true";
  struct Case {
    std::string name, expected;
    std::function<void()> set_up;
  } cases[] = {
      {"a page linking to itself", "does not end: page 2 is " + first + " again; refused, nothing downloaded",
       [&] { hub_.link_next = first; }},
      {"endless pages, entries",
       "has more than 20 entries (tune download's bound on a listing, files and folders of "
       "all pages together); refused, nothing downloaded",
       [&] { hub_.endless_pages = true, options_.listing_bounds.max_entries = 20; }},
      {"endless pages, pages", "does not end: more than 3 pages (tune download's bound on a listing); refused",
       [&] { hub_.endless_pages = true, options_.listing_bounds.max_pages = 3; }},
      {"endless pages, bytes", "exceeds 2.93 KiB (tune download's bound on a listing, all pages together); refused",
       [&] { hub_.endless_pages = true, options_.listing_bounds.max_bytes = 3000; }},
      {"one large page", "exceeds 100 B (tune download's bound on one page of a listing); refused",
       [&] { options_.listing_bounds.max_page_bytes = 100; }},
      {"deep nesting", "nests JSON deeper than 32 levels (tune download's bound; a listing needs 3); refused",
       [&] { hub_.raw_listing = std::string(100000, '[') + std::string(100000, ']'); }},
      {"a flood of headers",
       "the server sent more than 256.00 KiB of response headers (tune download's bound); refused",
       [&] { hub_.header_flood = 1 << 20; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    hub_.link_next.clear();
    hub_.endless_pages = false;
    hub_.raw_listing.clear();
    hub_.header_flood = 0;
    options_.listing_bounds = HubListingBounds();
    c.set_up();
    StatusOr<HubDownloadResult> r = Download();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind("org/tiny", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
    EXPECT_FALSE(PathExists(options_.output_dir));
  }
}

// A dropped connection or a busy Hub (5xx) is retried within the run with growing waits, each retry a line of
// its own, and a cut file resumes where it stopped; a Hub that stays busy ends the run naming the tries.
TEST_F(HubDownloadTest, TransientFailuresAreRetriedWithinTheRun) {
  hub_.cut_path = "model.safetensors";
  hub_.cut_after = 100000;
  const std::string listing = "/api/models/org/tiny/tree/main?recursive=true";
  hub_.fail_503[listing] = 2;
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read(Out("model.safetensors")), hub_.files["model.safetensors"].content);
  const std::string shown = progress_.str();
  EXPECT_EQ(
      shown.rfind("org/tiny: the Hub answered HTTP 503 to " + hub_.endpoint() + listing + "; retry 1 of 5 in 0.01 s\n",
                  0),
      0u)
      << shown;
  EXPECT_NE(shown.find("\norg/tiny: the Hub answered HTTP 503 to " + hub_.endpoint() + listing +
                       "; retry 2 of 5 in 0.02 s\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("\nmodel.safetensors: network error: " + hub_.endpoint() +
                       "/org/tiny/resolve/main/"
                       "model.safetensors: "),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find(" kept in " + Out("model.safetensors.incomplete") + "; retry 1 of 5 in 0.01 s\n"),
            std::string::npos)
      << shown;
  std::vector<std::string> requests = hub_.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(), "/lfs-store/model.safetensors bytes=100000-"), requests.end())
      << ::testing::PrintToString(requests);

  hub_.fail_503[listing] = 100;
  options_.retries = 2;
  options_.output_dir = dir_.path() + "/busy";
  r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "org/tiny: the Hub answered HTTP 503 to " + hub_.endpoint() + listing +
                                      "; fix: re-run later (a partly downloaded file resumes) (gave up after 3 tries)");

  options_.endpoint = "http://127.0.0.1:1";  // nothing listens: not transient, one try
  progress_.str("");
  r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(progress_.str().find("retry"), std::string::npos) << progress_.str();
}

// A transfer with no data shows as stalled (not a frozen line), and its error starts a line of its own.
TEST_F(HubDownloadTest, AStalledTransferShowsAsStalled) {
  hub_.stall_path = "model.safetensors";
  hub_.stall_after = 1000;
  hub_.stall_s = 3;
  options_.stall_notice_s = 0.3;
  options_.retries = 0;
  options_.progress_is_terminal = true;
  CurlTransportOptions quick;
  quick.stall_timeout_s = 1;
  std::unique_ptr<HttpTransport> transport = MakeCurlTransport(quick);
  StatusOr<HubDownloadResult> r = DownloadHubRepo(options_, *transport);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.safetensors: network error: "), std::string::npos) << r.status().message();
  const std::string shown = progress_.str();
  const size_t stalled = shown.find("\rmodel.safetensors: 1000 B / 292.97 KiB (0%), ");
  ASSERT_NE(stalled, std::string::npos) << shown;
  EXPECT_NE(shown.find(", stalled: no data for ", stalled), std::string::npos) << shown;
  EXPECT_EQ(shown.back(), '\n') << "the line is ended before the error is printed: " << shown;
}

// `--repo-type dataset` lists and fetches the dataset repo, into the folder the dataset components read for
// `source: <hub id>` ($TUNE_MATRIX_DATA/<hub id>, else ~/.cache/tune-matrix/datasets/<hub id>).
TEST_F(HubDownloadTest, DatasetsGoWhereTheDatasetComponentsReadThem) {
  hub_.dataset = true;
  setenv("TUNE_MATRIX_DATA", (dir_.path() + "/data").c_str(), 1);
  options_.repo_type = "dataset";
  options_.output_dir.clear();
  EXPECT_EQ(DownloadFolder(options_), dir_.path() + "/data/org/tiny");
  StatusOr<HubDownloadResult> r = Download();
  unsetenv("TUNE_MATRIX_DATA");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output_dir, dir_.path() + "/data/org/tiny");
  EXPECT_EQ(Read(dir_.path() + "/data/org/tiny/original/tokenizer.model"),
            hub_.files["original/tokenizer.model"].content);
  std::vector<std::string> requests = hub_.Requests();
  EXPECT_EQ(requests.front(), "/api/datasets/org/tiny/tree/main?recursive=true");
  EXPECT_NE(std::find(requests.begin(), requests.end(), "/datasets/org/tiny/resolve/main/config.json"), requests.end())
      << ::testing::PrintToString(requests);

  options_.repo_type = "model";
  options_.output_dir = dir_.path() + "/as_model";
  r = Download();
  ASSERT_FALSE(r.ok()) << "a dataset is not a model";
  EXPECT_NE(r.status().message().find("not found (HTTP 404"), std::string::npos) << r.status().message();
}

TEST_F(HubDownloadTest, CompleteFilesAreSkippedAndWrongOnesFetchedAgain) {
  ASSERT_TRUE(Download().ok());
  ASSERT_TRUE(WriteFileAtomically(Out("config.json"), "{}\n").ok());  // not the Hub's file
  hub_.ClearRequests();
  progress_.str("");
  StatusOr<HubDownloadResult> again = Download();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->skipped, (std::vector<std::string>{"model.safetensors", "original/tokenizer.model"}));
  EXPECT_EQ(again->downloaded, std::vector<std::string>{"config.json"});
  EXPECT_EQ(Read(Out("config.json")), hub_.files["config.json"].content);
  EXPECT_EQ(hub_.Requests(), (std::vector<std::string>{"/api/models/org/tiny/tree/main?recursive=true",
                                                       "/org/tiny/resolve/main/config.json"}));
  EXPECT_NE(progress_.str().find("model.safetensors: already complete (size and checksum match), skipped"),
            std::string::npos) << progress_.str();
}

TEST_F(HubDownloadTest, MissingRepoOrRevisionAndNoServer) {
  options_.revision = "v9";
  StatusOr<HubDownloadResult> r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_NE(r.status().message().find("no repository 'org/tiny' with revision 'v9'"), std::string::npos)
      << r.status().message();

  options_.revision = "main";
  options_.endpoint = "http://127.0.0.1:1";  // nothing listens there
  r = Download();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 1);
  EXPECT_NE(r.status().message().find("network error listing its files: http://127.0.0.1:1/api/models/org/tiny/tree/main"),
            std::string::npos) << r.status().message();
}

TEST(HubDownloadPieces, Defaults) {
  HubDownloadOptions o;
  o.repo_id = "meta-llama/Llama-3.2-1B-Instruct";
  EXPECT_EQ(DownloadFolder(o), "/tmp/Llama-3.2-1B-Instruct");
  EXPECT_EQ(o.revision, "main");
  EXPECT_EQ(o.endpoint, "https://huggingface.co");
  EXPECT_TRUE(o.ignore_patterns.empty());
}

// `tune download` itself: exit statuses and messages, HF_ENDPOINT and HF_TOKEN from the environment.
class TuneDownloadTest : public HubDownloadTest {
 protected:
  void SetUp() override {
    HubDownloadTest::SetUp();
    setenv("HF_ENDPOINT", (hub_.endpoint() + "/").c_str(), 1);
    unsetenv("HF_TOKEN");
  }
  void TearDown() override {
    unsetenv("HF_ENDPOINT");
    unsetenv("HF_TOKEN");
  }
  int Tune(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    std::unique_ptr<HttpTransport> transport = MakeCurlTransport();
    return RunDownloadCommand(std::vector<std::string>(args.begin() + 1, args.end()), out_, err_, *transport);
  }
  std::ostringstream out_, err_;
};

TEST_F(TuneDownloadTest, DownloadsAndListsTheFiles) {
  ASSERT_EQ(Tune({"download", "org/tiny", "--output-dir", options_.output_dir, "--ignore-patterns", "*.safetensors"}), 0)
      << err_.str();
  EXPECT_EQ(out_.str(), "Ignoring files matching the following patterns: *.safetensors\n"
                        "Downloaded org/tiny (revision main) to " + options_.output_dir +
                        ": 2 files fetched, 0 already complete, 1 ignored\n" +
                        Out("config.json") + "\n" + Out("original/tokenizer.model") + "\n");
  EXPECT_EQ(Read(Out("config.json")), hub_.files["config.json"].content);
  ASSERT_EQ(Tune({"download", "org/tiny", "--output-dir", options_.output_dir, "--revision", "main"}), 0) << err_.str();
  EXPECT_NE(out_.str().find(": 1 file fetched, 2 already complete, 0 ignored\n"), std::string::npos) << out_.str();
  EXPECT_NE(err_.str().find("config.json: already complete"), std::string::npos) << err_.str();
}

// A password in HF_ENDPOINT authenticates to the Hub but is never printed: not in an HTTP error, not in a
// network error, not in the list of files.
TEST_F(TuneDownloadTest, CredentialsInTheEndpointAreNeverPrinted) {
  const std::string with_password = "http://hfuser:s3cret-pass@127.0.0.1:" + hub_.endpoint().substr(17);
  std::string printed;
  auto tune = [&](const std::vector<std::string>& args) {
    int status = Tune(args);
    printed += out_.str() + err_.str();
    return status;
  };
  setenv("HF_ENDPOINT", with_password.c_str(), 1);
  EXPECT_EQ(tune({"download", "org/tiny", "--output-dir", options_.output_dir, "--revision", "v9"}), 2);
  EXPECT_NE(err_.str().find("not found (HTTP 404 from " + hub_.endpoint() + "/api/models/org/tiny/tree/v9"),
            std::string::npos)
      << err_.str();
  EXPECT_NE(err_.str().find("' on " + hub_.endpoint() + "; fix"), std::string::npos) << err_.str();
  EXPECT_EQ(tune({"download", "org/tiny", "--output-dir", options_.output_dir}), 0) << err_.str();
  hub_.cut_path = "config.json";
  hub_.cut_after = 3;
  EXPECT_EQ(tune({"download", "org/tiny", "--output-dir", dir_.path() + "/cut"}), 0) << err_.str();
  EXPECT_NE(err_.str().find("config.json: network error: " + hub_.endpoint() + "/org/tiny/resolve/main/config.json"),
            std::string::npos)
      << "the retry's line: " << err_.str();
  setenv("HF_ENDPOINT", "http://hfuser:s3cret-pass@127.0.0.1:1", 1);  // nothing listens there
  EXPECT_EQ(tune({"download", "org/tiny", "--output-dir", options_.output_dir}), 1);
  EXPECT_NE(err_.str().find("network error listing its files: http://127.0.0.1:1/api/models/"), std::string::npos)
      << err_.str();
  EXPECT_EQ(printed.find("s3cret"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("hfuser"), std::string::npos) << printed;
}

TEST_F(TuneDownloadTest, RepoTypeDataset) {
  hub_.dataset = true;
  setenv("TUNE_MATRIX_DATA", (dir_.path() + "/data").c_str(), 1);
  EXPECT_EQ(Tune({"download", "org/tiny", "--repo-type", "dataset"}), 0) << err_.str();
  unsetenv("TUNE_MATRIX_DATA");
  EXPECT_EQ(out_.str().rfind("Downloaded dataset org/tiny (revision main) to " + dir_.path() +
                                 "/data/org/tiny: 3 files fetched, 0 already complete, 0 ignored\n",
                             0),
            0u)
      << out_.str();
  EXPECT_EQ(Tune({"download", "org/tiny", "--repo-type", "space"}), 2);
  EXPECT_NE(err_.str().find("--repo-type space: not model or dataset"), std::string::npos) << err_.str();
}

TEST_F(TuneDownloadTest, ExitStatusesAndMessages) {
  hub_.required_token = "hf_cli_secret";
  EXPECT_EQ(Tune({"download", "org/tiny", "--output-dir", options_.output_dir}), 2);
  EXPECT_NE(err_.str().find("error: tune download: org/tiny: "), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("--hf-token <token>"), std::string::npos) << err_.str();

  EXPECT_EQ(Tune({"download", "org/tiny", "--output-dir", options_.output_dir, "--hf-token", "hf_bad_secret"}), 2);
  EXPECT_EQ(err_.str().find("hf_bad_secret"), std::string::npos) << err_.str();

  setenv("HF_TOKEN", "hf_cli_secret", 1);
  EXPECT_EQ(Tune({"download", "org/tiny", "--output-dir", options_.output_dir}), 0) << err_.str();
  EXPECT_EQ(err_.str().find("hf_cli_secret"), std::string::npos);

  hub_.files["config.json"].listed_digest = std::string(40, 'e');
  EXPECT_EQ(Tune({"download", "org/tiny", "--output-dir", dir_.path() + "/other"}), 1);
  EXPECT_NE(err_.str().find("config.json: checksum mismatch"), std::string::npos) << err_.str();
  EXPECT_FALSE(PathExists(dir_.path() + "/other/config.json"));

  EXPECT_EQ(Tune({"download"}), 2);
  EXPECT_NE(err_.str().find("error: tune download: expected one <repo_id>"), std::string::npos) << err_.str();
  EXPECT_EQ(Tune({"download", "../x"}), 2);
  EXPECT_NE(err_.str().find("is not a Hub repo id"), std::string::npos) << err_.str();
  EXPECT_EQ(Tune({"download", "org/nope", "--output-dir", options_.output_dir}), 2);
  EXPECT_NE(err_.str().find("not found (HTTP 404"), std::string::npos) << err_.str();
}

}  // namespace
}  // namespace tmx
