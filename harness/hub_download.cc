#include "harness/hub_download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/output_folder.h"
#include "base/sha.h"
#include "base/text.h"
#include "harness/cli.h"
#include "harness/config_store.h"
#include "harness/download_folder.h"

namespace tmx {

std::string HttpResponse::Header(const std::string& lowercase_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lowercase_name) return value;
  }
  return "";
}

namespace {

// What a file is called while it is being downloaded (huggingface_hub's name for it).
constexpr char kPartialSuffix[] = ".incomplete";

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// What one curl transfer reports to its callbacks.
struct CurlTransfer {
  CURL* curl = nullptr;
  const std::function<bool(long, const char*, size_t)>* sink = nullptr;
  HttpResponse* response = nullptr;
  size_t header_bytes = 0;  // of all responses (redirects included), bounded by kMaxHeaderBytes
};

// What a transfer's responses may send in headers, all together: a server streaming headers without end is
// stopped here.
// (libcurl's own bound, 300 KiB in 7.88, is higher: this one names itself.)
constexpr size_t kMaxHeaderBytes = size_t{256} << 10;

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<CurlTransfer*>(user);
  t->header_bytes += size * n;
  if (t->header_bytes > kMaxHeaderBytes) return 0;
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // a new response (after a redirect): only the last one's headers count
  } else if (size_t colon = line.find(':'); colon != std::string::npos) {
    t->response->headers.emplace_back(Lower(Trim(line.substr(0, colon))), Trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<CurlTransfer*>(user);
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) return (*t->sink)(status, data, size * n) ? size * n : 0;
  std::string& body = t->response->error_body;
  body.append(data, std::min(size * n, body.size() < 4096 ? 4096 - body.size() : 0));
  return size * n;
}

// libcurl's progress callback, about once a second whatever arrives: the request's tick.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* request = static_cast<const HttpRequest*>(user);
  if (request->tick) request->tick();
  return 0;
}

// Whether a failed transfer may pass on a retry: the connection reset, cut short or timed out (a stall
// included), not a refused connection, an unknown host, a bad URL or a body the sink refused.
bool Transient(CURLcode rc) {
  switch (rc) {
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

class CurlTransport : public HttpTransport {
 public:
  explicit CurlTransport(const CurlTransportOptions& options) : options_(options) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  Status Get(const HttpRequest& request, const std::function<bool(long, const char*, size_t)>& sink,
             HttpResponse* response) override {
    *response = HttpResponse();
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return Status::Internal(ShownUrl(request.url) + ": libcurl could not start a transfer");
    CurlTransfer t{curl.get(), &sink, response};
    char error[CURL_ERROR_SIZE] = "";
    curl_slist* headers = nullptr;
    if (!request.bearer_token.empty()) {
      // A custom Authorization header: libcurl drops it on a redirect to another host (the Hub's LFS CDN).
      headers = curl_slist_append(headers, ("Authorization: Bearer " + request.bearer_token).c_str());
    }
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
    const std::string range = request.range_from >= 0 ? std::to_string(request.range_from) + "-" : "";
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options_.stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &request);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tune-matrix");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
    if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response->status);
    char* effective = nullptr;
    if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK && effective != nullptr) {
      response->final_url = effective;
    }
    if (t.header_bytes > kMaxHeaderBytes) {
      return Status::IoError(ShownUrl(request.url) + ": the server sent more than " + FormatBytes(kMaxHeaderBytes) +
                             " of response headers (tune download's bound); refused");
    }
    if (rc != CURLE_OK) {
      response->transient = Transient(rc);
      return Status::IoError(ShownUrl(request.url) + ": " +
                             TerminalText(error[0] != '\0' ? error : curl_easy_strerror(rc)));
    }
    return Status::OK();
  }

 private:
  CurlTransportOptions options_;
};

// The repo's path on the Hub: "owner/name" for a model, "datasets/owner/name" for a dataset.
std::string RepoPath(const HubDownloadOptions& o) { return (o.repo_type == "dataset" ? "datasets/" : "") + o.repo_id; }

// The token for a request to `url`: the one given on HF_ENDPOINT's own origin (scheme, host and port), none
// anywhere else, wherever the URL came from (a listing's Link header names any URL it likes).
std::string TokenFor(const HubDownloadOptions& o, const std::string& url) {
  return SameOrigin(url, o.endpoint) ? o.token : "";
}

// Whether an HTTP status may pass on a retry (huggingface_hub's http_backoff retries these).
bool TransientStatus(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

// After failed try number `tries` (1 for the first): OK when it is to be tried again (a transient failure with
// retries left: the failure and the wait are printed on a line of their own, then the wait is slept), else
// the error to return.
Status NextTry(const HubDownloadOptions& o, const Status& failure, bool transient, int tries) {
  if (!transient || tries > o.retries) {
    if (tries == 1) return failure;
    return Status::IoError(failure.message() + " (gave up after " + std::to_string(tries) + " tries)");
  }
  const double wait = std::min(o.retry_max_s, o.retry_initial_s * std::pow(2.0, tries - 1));
  if (o.progress != nullptr) {
    const std::string& m = failure.message();
    *o.progress << m.substr(0, std::min(m.find("; fix:"), m.size())) << "; retry " << tries << " of " << o.retries
                << " in " << FormatNumber(wait, wait < 1 ? 2 : 0) << " s\n"
                << std::flush;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  return Status::OK();
}

// The error for a non-2xx answer to `url` about the repo (`file` "") or a file of it, with the fix.
Status HttpError(const HubDownloadOptions& o, const std::string& file, const std::string& url, long status) {
  const std::string what = file.empty() ? o.repo_id : TerminalText(file), shown = ShownUrl(url);
  const std::string token_fix =
      "pass a Hugging Face token with --hf-token <token> or in the environment variable HF_TOKEN (create one at "
      "https://huggingface.co/settings/tokens; for a gated repo, accept its terms on https://huggingface.co/" +
      o.repo_id + " first)";
  const bool sent_token = !TokenFor(o, url).empty();
  if (status == 401 && !sent_token) {
    return Status::FailedPrecondition(what + ": the Hub refused " + shown + " without a token (HTTP 401): " +
                                      o.repo_id + " is gated or private (or does not exist); fix: " + token_fix);
  }
  if (status == 401 || status == 403) {
    return Status::FailedPrecondition(
        what + ": the Hub refused " + shown + " with the token given (HTTP " + std::to_string(status) +
        "): " + o.repo_id +
        " is gated or private and this token is invalid or has no access to it; fix: check the token "
        "(https://huggingface.co/settings/tokens) and that your account was granted access on "
        "https://huggingface.co/" +
        o.repo_id + (sent_token ? "" : "; or " + token_fix));
  }
  if (status == 404 && !file.empty()) {
    return Status::NotFound(what + ": the Hub lists this file but answered HTTP 404 for " + shown +
                            "; fix: re-run (if the revision moved meanwhile, pin one with --revision <commit>)");
  }
  if (status == 404) {
    return Status::NotFound(what + ": not found (HTTP 404 from " + shown + "): no repository '" + o.repo_id +
                            "' with revision '" + TerminalText(o.revision) + "' on " + ShownUrl(o.endpoint) +
                            "; fix: check the repo id (owner/name, as on its Hub page) and --revision");
  }
  return Status::IoError(what + ": the Hub answered HTTP " + std::to_string(status) + " to " + shown +
                         "; fix: re-run later (a partly downloaded file resumes)");
}

// The digest the listing gives for `f` and the one of the bytes of `fd`: sha256 for an LFS file, the git
// blob sha1 otherwise; both empty when the listing gives neither (then only the size is checked).
struct Digests {
  std::string kind, expected, actual;
};

StatusOr<Digests> HashFile(int fd, const HubFile& f, const std::string& shown) {
  Digests d;
  std::unique_ptr<Sha> hash;
  if (!f.sha256.empty()) {
    d.kind = "sha256";
    d.expected = Lower(f.sha256);
    hash = std::make_unique<Sha256>();
  } else if (f.git_oid.size() == 40) {
    d.kind = "git blob sha1";
    d.expected = Lower(f.git_oid);
    hash = std::make_unique<Sha1>();
    std::string header = "blob " + std::to_string(f.size);
    hash->Update(header.data(), header.size() + 1);  // with its NUL, as GitBlobSha1
  } else {
    return d;
  }
  std::vector<char> buf(1 << 20);
  for (off_t at = 0;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(shown + ": read failed while checking its " + d.kind);
    if (n == 0) break;
    hash->Update(buf.data(), static_cast<size_t>(n));
    at += n;
  }
  d.actual = hash->HexDigest();
  return d;
}

// A per-file progress line, throttled; '\r'-rewritten on a terminal, separate lines otherwise. A transfer
// with no data for o.stall_notice_s shows as stalled. A line left open on a terminal is ended when the
// transfer is over, so what is printed next (a retry, an error) starts a line of its own.
class Progress {
 public:
  Progress(const HubDownloadOptions& o, const std::string& name, int64_t total, int64_t start)
      : o_(o),
        name_(name),
        total_(total),
        start_(start),
        bytes_(start),
        begun_(Clock::now()),
        last_(begun_),
        last_data_(begun_) {}
  ~Progress() {
    if (open_) *o_.progress << "\n" << std::flush;
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Update(int64_t bytes) {
    bytes_ = bytes;
    last_data_ = Clock::now();
    if (o_.progress == nullptr) return;
    double interval = o_.progress_is_terminal ? o_.progress_interval_s : 8 * o_.progress_interval_s;
    if (Seconds(last_data_ - last_) < interval) return;
    Print("");
  }

  // While the transfer runs (about once a second): shows a stall.
  void Tick() {
    const auto now = Clock::now();
    const double idle = Seconds(now - last_data_);
    if (o_.progress == nullptr || idle < o_.stall_notice_s) return;
    if (Seconds(now - last_) < (o_.progress_is_terminal ? 1.0 : o_.stall_notice_s)) return;
    Print("stalled: no data for " + FormatDuration(idle));
  }

  void Done(int64_t bytes) {
    bytes_ = bytes;
    if (o_.progress != nullptr) Print("done in " + FormatDuration(Seconds(Clock::now() - begun_)), true);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  void Print(const std::string& state, bool done = false) {
    last_ = Clock::now();
    double elapsed = Seconds(last_ - begun_);
    double rate = elapsed > 0 ? static_cast<double>(bytes_ - start_) / elapsed : 0;
    std::string line = name_ + ": " + FormatBytes(bytes_) + " / " + FormatBytes(total_);
    if (total_ > 0) line += " (" + std::to_string(bytes_ * 100 / total_) + "%)";
    line += ", " + FormatBytes(static_cast<int64_t>(rate)) + "/s";
    if (start_ > 0) line += ", resumed at " + FormatBytes(start_);
    if (!state.empty()) line += ", " + state;
    if (o_.progress_is_terminal) {
      std::string padded = line + std::string(line.size() < width_ ? width_ - line.size() : 0, ' ');
      width_ = std::max(width_, line.size());
      *o_.progress << "\r" << padded << (done ? "\n" : "") << std::flush;
      open_ = !done;
    } else {
      *o_.progress << line << "\n" << std::flush;
    }
  }

  const HubDownloadOptions& o_;
  std::string name_;
  int64_t total_, start_, bytes_;
  Clock::time_point begun_, last_, last_data_;
  size_t width_ = 0;
  bool open_ = false;  // a '\r' line is on the terminal without its end
};

// What is already at a file's place: nothing, the listed file whole, or something else (another revision's
// file, a damaged one, or one this process's user does not own alone, which is never trusted as complete).
enum class Present { kNothing, kComplete, kOther };

StatusOr<Present> ExistingFile(const FolderEntry& e, const HubFile& f) {
  struct stat st {};
  StatusOr<bool> exists = StatAt(e.dir.get(), e.name, e.shown, &st);
  if (!exists.ok()) return exists.status();
  if (!*exists) return Present::kNothing;
  StatusOr<UniqueFd> fd = OpenRegularFile(e.dir.get(), e.name, e.shown);  // a link or a FIFO is refused
  if (!fd.ok()) return fd.status();
  if (!OwnedSolely(st) || static_cast<int64_t>(st.st_size) != f.size) return Present::kOther;
  StatusOr<Digests> d = HashFile(fd->get(), f, e.shown);
  return d.ok() && d->expected == d->actual ? Present::kComplete : Present::kOther;
}

// Writes `data` to the partial file at its position; false when the disk refuses.
bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Empties the partial file (the server sends the whole file, or the partial one is not a prefix of it).
bool Restart(PartialFile* p) {
  if (::ftruncate(p->fd.get(), 0) != 0 || ::lseek(p->fd.get(), 0, SEEK_SET) != 0) return false;
  p->size = 0;
  return true;
}

// A file being fetched: the listing's entry, where it goes, and its partial file.
struct Fetch {
  const HubFile& file;
  FolderEntry entry;
  std::string partial_name;   // "<name>.incomplete"
  std::string shown_partial;  // its path, as messages show it
  PartialFile partial;
  std::string shown_name() const { return TerminalText(file.path); }
  void Discard() const { ::unlinkat(entry.dir.get(), partial_name.c_str(), 0); }
};

// One GET of the file into its partial file from the partial's size, never past the listed size: a body
// longer than that is cut there and refused (the partial file deleted). `*response` is the answer.
Status GetInto(const HubDownloadOptions& o, HttpTransport& transport, const std::string& url, Fetch* f,
               HttpResponse* response) {
  PartialFile* p = &f->partial;
  const int64_t start = p->size, listed = f->file.size;
  bool write_failed = false, too_long = false, first = true;
  Progress progress(o, f->shown_name(), listed, start);
  Status s = transport.Get(
      HttpRequest{url, TokenFor(o, url), start > 0 ? start : -1, [&] { progress.Tick(); }},
      [&](long status, const char* data, size_t n) {
        if (first && start > 0 && status != 206 && !Restart(p)) return !(write_failed = true);
        first = false;  // above: the server ignored the Range header and sends the whole file, so start over
        const size_t keep = static_cast<size_t>(std::clamp<int64_t>(listed - p->size, 0, static_cast<int64_t>(n)));
        too_long = keep < n;
        if (!WriteAll(p->fd.get(), data, keep)) return !(write_failed = true);
        p->size += static_cast<int64_t>(keep);
        progress.Update(p->size);
        return !too_long;
      },
      response);
  if (too_long) {
    f->Discard();
    return Status::IoError(f->shown_name() + ": the Hub sent more than the " + std::to_string(listed) + " bytes (" +
                           FormatBytes(listed) +
                           ") its listing gives for this file (the bound on its download); "
                           "stopped there, nothing beyond written, and the download was deleted; fix: re-run the "
                           "command (if it happens again, the Hub or something between serves another file than it "
                           "lists)");
  }
  if (write_failed) {
    return Status::IoError(f->shown_partial + ": writing failed after " + FormatBytes(p->size) +
                           "; fix: free disk space, then re-run the same command to resume");
  }
  if (!s.ok()) {
    return Status::IoError(f->shown_name() + ": network error: " + s.message() + "; " + FormatBytes(p->size) + " of " +
                           FormatBytes(listed) + " kept in " + f->shown_partial +
                           "; fix: re-run the same command to resume from there");
  }
  if (response->status >= 200 && response->status < 300) progress.Done(p->size);
  return Status::OK();
}

// Fetches the file into its partial file (resuming from its size) until it holds what the Hub sends,
// retrying transient failures.
Status Transfer(const HubDownloadOptions& o, HttpTransport& transport, Fetch* f) {
  const std::string url = o.endpoint + "/" + RepoPath(o) + "/resolve/" + PercentEncode(o.revision, false) + "/" +
                          PercentEncode(f->file.path, true);
  PartialFile* p = &f->partial;
  if (p->size > f->file.size && !Restart(p)) return Status::IoError(f->shown_partial + ": cannot be emptied");
  bool restarted = false;
  for (int tries = 1;; ++tries) {
    if (p->size == f->file.size) return Status::OK();  // all there (from an earlier try): only the check is left
    HttpResponse response;
    Status s = GetInto(o, transport, url, f, &response);
    bool transient = response.transient;
    if (s.ok() && response.status == 416 && p->size > 0 && !restarted) {  // the partial is not a prefix of it
      if (!Restart(p)) return Status::IoError(f->shown_partial + ": cannot be emptied");
      restarted = true;
      --tries;
      continue;
    }
    if (s.ok() && response.status >= 200 && response.status < 300) return Status::OK();
    if (s.ok()) {
      transient = TransientStatus(response.status);
      if (p->size == 0 && !transient) f->Discard();
      s = HttpError(o, f->file.path, url, response.status);
    }
    TM_RETURN_IF_ERROR(NextTry(o, s, transient, tries));
  }
}

// Checks the partial file against the listing and gives it the file's name; a mismatch deletes it.
Status Finish(const Fetch& f) {
  const HubFile& file = f.file;
  struct stat st {};
  if (::fstat(f.partial.fd.get(), &st) != 0 || st.st_size != file.size) {
    f.Discard();
    return Status::IoError(f.shown_name() + ": the Hub sent " + FormatBytes(st.st_size) + " (" +
                           std::to_string(st.st_size) + " bytes) but lists it as " + std::to_string(file.size) +
                           " bytes; the download was deleted; fix: re-run the command");
  }
  StatusOr<Digests> d = HashFile(f.partial.fd.get(), file, f.shown_partial);
  if (!d.ok()) return d.status();
  if (d->expected != d->actual) {
    f.Discard();
    return Status::IoError(f.shown_name() + ": checksum mismatch: the Hub lists " + d->kind + " " + d->expected +
                           " but the bytes downloaded have " + d->actual +
                           "; the download was deleted; fix: re-run the command to fetch it again (if it fails "
                           "again, something between here and the Hub alters the file)");
  }
  const int dir = f.entry.dir.get();
  if (::fsync(f.partial.fd.get()) != 0 || ::renameat(dir, f.partial_name.c_str(), dir, f.entry.name.c_str()) != 0) {
    return Status::IoError(f.shown_partial + ": cannot be saved as " + f.entry.shown + " (" + std::strerror(errno) +
                           "); fix: check the folder's permissions and free disk");
  }
  return Status::OK();
}

// Fetches `file` into `folder`, resuming `<file>.incomplete`; `*fetched` false when it was already complete.
Status FetchFile(const HubDownloadOptions& o, HttpTransport& transport, const LockedFolder& folder, const HubFile& file,
                 bool* fetched) {
  StatusOr<FolderEntry> entry = folder.Entry(file.path);
  if (!entry.ok()) return entry.status();
  Fetch f{file, std::move(entry).value(), "", "", PartialFile()};
  f.partial_name = f.entry.name + kPartialSuffix;
  f.shown_partial = f.entry.shown + kPartialSuffix;
  StatusOr<Present> present = ExistingFile(f.entry, file);
  if (!present.ok()) return present.status();
  *fetched = *present != Present::kComplete;
  if (*present == Present::kComplete) {
    if (o.progress != nullptr)
      *o.progress << f.shown_name() << ": already complete (size and checksum match), skipped\n";
    return Status::OK();
  }
  if (*present == Present::kOther && o.progress != nullptr) {
    *o.progress << f.shown_name()
                << ": present but not this revision's file (or not this user's alone); downloading it\n";
  }
  StatusOr<PartialFile> partial = OpenPartial(f.entry.dir.get(), f.partial_name, f.shown_partial);
  if (!partial.ok()) return partial.status();
  f.partial = std::move(partial).value();
  TM_RETURN_IF_ERROR(Transfer(o, transport, &f));
  return Finish(f);
}

// Refuses an output folder that is, or lies inside, the checkout's configs or reports (real paths compared, so
// no link or `..` leads around it): a download there would overwrite built-in configs or recorded results.
Status CheckOutputFolder(const std::string& dir) {
  const std::string configs = CheckoutConfigDir();
  const std::vector<std::pair<std::string, std::string>> guarded = {
      {configs, "tune-matrix's built-in configs"},
      {BuiltinConfigDir(), "tune-matrix's built-in configs"},
      {ParentDir(configs) + "/reports", "tune-matrix's recorded results"}};
  const std::string real = RealPathToBe(dir);
  for (const auto& [folder, what] : guarded) {
    const std::string real_folder = RealPathToBe(folder);
    if (real == real_folder || real.rfind(real_folder + "/", 0) == 0) {
      return Status::InvalidArgument("--output-dir " + TerminalText(dir) + ": lies inside " + folder +
                                     (real == dir ? "" : " (it resolves to " + TerminalText(real) + ")") +
                                     ", which holds " + what +
                                     "; a download there would overwrite them; nothing written; fix: choose a folder "
                                     "outside the checkout's configs/ and reports/ (the default is /tmp/<name>)");
    }
  }
  return Status::OK();
}

// One page of the listing at `url` into `*body`, within `room` bytes (the listing's budget left, at most a
// page's bound); `*next` the next page's URL ("" at the last).
Status ListingPage(const HubDownloadOptions& o, HttpTransport& transport, const std::string& url, int64_t room,
                   std::string* body, std::string* next, HttpResponse* response_out) {
  const HubListingBounds& bounds = o.listing_bounds;
  bool too_big = false;
  HttpResponse& response = *response_out;
  Status s = transport.Get(
      {url, TokenFor(o, url), -1},
      [&](long, const char* data, size_t n) {
        too_big = static_cast<int64_t>(body->size() + n) > std::min(room, bounds.max_page_bytes);
        if (!too_big) body->append(data, n);
        return !too_big;
      },
      &response);
  if (too_big) {
    const bool page = room > bounds.max_page_bytes;
    return Status::IoError(o.repo_id + ": the Hub's file listing (at " + ShownUrl(url) + ") exceeds " +
                           FormatBytes(page ? bounds.max_page_bytes : bounds.max_bytes) +
                           " (tune download's bound on " +
                           (page ? "one page of a listing" : "a listing, all pages together") +
                           "); refused, nothing downloaded; fix: "
                           "check HF_ENDPOINT points at a trustworthy Hub (a repo this large is beyond tune download)");
  }
  if (!s.ok()) {
    return Status::IoError(o.repo_id + ": network error listing its files: " + s.message() +
                           "; fix: check the connection (and HF_ENDPOINT, if set), then re-run");
  }
  if (response.status != 200) {
    response.transient = TransientStatus(response.status);
    return HttpError(o, "", url, response.status);
  }
  *next = NextPageUrl(response.Header("link"), url);
  return Status::OK();
}

// ListingPage, retried while it fails transiently.
Status ListingPageWithRetries(const HubDownloadOptions& o, HttpTransport& transport, const std::string& url,
                              int64_t room, std::string* body, std::string* next) {
  for (int tries = 1;; ++tries) {
    HttpResponse response;
    body->clear();
    Status s = ListingPage(o, transport, url, room, body, next, &response);
    if (s.ok()) return s;
    TM_RETURN_IF_ERROR(NextTry(o, s, response.transient, tries));
  }
}

// Every file of the repo's revision, from all pages of the Hub's tree listing, within o.listing_bounds.
StatusOr<std::vector<HubFile>> ListRepo(const HubDownloadOptions& o, HttpTransport& transport) {
  const HubListingBounds& bounds = o.listing_bounds;
  std::vector<HubFile> files;
  std::set<std::string> seen;
  int64_t bytes = 0, entries = 0;
  std::string url = o.endpoint + "/api/" + (o.repo_type == "dataset" ? "datasets/" : "models/") + o.repo_id + "/tree/" +
                    PercentEncode(o.revision, false) + "?recursive=true";
  auto last_line = std::chrono::steady_clock::now();
  for (int page = 0; !url.empty(); ++page) {
    const auto now = std::chrono::steady_clock::now();
    if (o.progress != nullptr && now - last_line > std::chrono::seconds(2)) {  // a long listing is never silent
      *o.progress << o.repo_id << ": listing its files, page " << page + 1 << ", " << files.size() << " files so far\n"
                  << std::flush;
      last_line = now;
    }
    if (page == bounds.max_pages || !seen.insert(url).second) {
      return Status::IoError(o.repo_id + ": the Hub's file listing does not end: " +
                             (page == bounds.max_pages
                                  ? "more than " + std::to_string(page) +
                                        " pages (tune download's "
                                        "bound on a listing)"
                                  : "page " + std::to_string(page + 1) + " is " + ShownUrl(url) + " again") +
                             "; refused, nothing downloaded; fix: check HF_ENDPOINT points at a trustworthy Hub");
    }
    std::string body, next;
    TM_RETURN_IF_ERROR(ListingPageWithRetries(o, transport, url, bounds.max_bytes - bytes, &body, &next));
    bytes += static_cast<int64_t>(body.size());
    StatusOr<std::vector<HubFile>> listed =
        ParseTreeListing(body, o.repo_id + " (" + ShownUrl(url) + ")", bounds.max_entries, &entries);
    if (!listed.ok()) return listed.status();
    files.insert(files.end(), listed->begin(), listed->end());
    url = next;
  }
  return files;
}

}  // namespace

std::unique_ptr<HttpTransport> MakeCurlTransport(const CurlTransportOptions& options) {
  return std::make_unique<CurlTransport>(options);
}

std::string DownloadFolder(const HubDownloadOptions& options) {
  if (!options.output_dir.empty()) return options.output_dir;
  if (options.repo_type == "dataset") return DatasetRoot() + "/" + options.repo_id;
  return "/tmp/" + options.repo_id.substr(options.repo_id.rfind('/') + 1);
}

StatusOr<HubDownloadResult> DownloadHubRepo(const HubDownloadOptions& options, HttpTransport& transport) {
  TM_RETURN_IF_ERROR(ValidateRepoId(options.repo_id));
  HubDownloadResult result;
  result.output_dir = DownloadFolder(options);
  TM_RETURN_IF_ERROR(CheckOutputFolder(result.output_dir));
  StatusOr<std::vector<HubFile>> listed = ListRepo(options, transport);
  if (!listed.ok()) return listed.status();
  std::vector<HubFile> files;
  for (HubFile& f : *listed) {
    TM_RETURN_IF_ERROR(CheckRepoPath(f.path, options.repo_id));  // every path, before anything is written
    bool ignored = std::any_of(options.ignore_patterns.begin(), options.ignore_patterns.end(),
                               [&](const std::string& p) { return MatchesPattern(f.path, p); });
    if (ignored) {
      result.ignored.push_back(f.path);
    } else {
      files.push_back(std::move(f));
    }
  }
  std::string notice;
  StatusOr<std::unique_ptr<LockedFolder>> folder = LockedFolder::Open(result.output_dir, &notice);
  if (!folder.ok()) return folder.status();
  if (!notice.empty() && options.progress != nullptr) *options.progress << notice << "\n";
  // No link anywhere a file goes, checked before anything is written (and again, race-free, as each is).
  for (const HubFile& f : files) TM_RETURN_IF_ERROR((*folder)->CheckPath(f.path, {kPartialSuffix}));
  for (const HubFile& f : files) {
    bool fetched = false;
    TM_RETURN_IF_ERROR(FetchFile(options, transport, **folder, f, &fetched));
    (fetched ? result.downloaded : result.skipped).push_back(f.path);
  }
  return result;
}

namespace {

// What `tune download`'s arguments and environment ask for; InvalidArgument naming a bad one (usage).
StatusOr<HubDownloadOptions> OptionsFromArgs(const ParsedArgs& parsed) {
  if (parsed.positional.size() != 1) {
    return Status::InvalidArgument("expected one <repo_id> (e.g. meta-llama/Llama-3.2-1B-Instruct)");
  }
  HubDownloadOptions o;
  o.repo_id = parsed.positional[0];
  TM_RETURN_IF_ERROR(ValidateRepoId(o.repo_id));
  o.repo_type = parsed.Get("repo-type", "model");
  if (o.repo_type != "model" && o.repo_type != "dataset") {
    return Status::InvalidArgument("--repo-type " + TerminalText(o.repo_type) +
                                   ": not model or dataset (the Hub's spaces are not downloaded)");
  }
  o.output_dir = parsed.Get("output-dir");
  o.revision = parsed.Get("revision", "main");
  if (o.revision.empty()) return Status::InvalidArgument("--revision is empty");
  o.token = parsed.Get("hf-token");
  if (o.token.empty() && std::getenv("HF_TOKEN") != nullptr) o.token = std::getenv("HF_TOKEN");
  if (const char* endpoint = std::getenv("HF_ENDPOINT"); endpoint != nullptr && *endpoint != '\0') {
    o.endpoint = endpoint;
  }
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  for (const auto& [name, value] : parsed.flags) {
    if (name != "ignore-patterns") continue;
    for (const std::string& p : SplitList(value)) o.ignore_patterns.push_back(p);
  }
  return o;
}

void PrintSummary(const HubDownloadOptions& o, const HubDownloadResult& result, std::ostream& out) {
  out << "Downloaded " << (o.repo_type == "dataset" ? "dataset " : "") << o.repo_id << " (revision "
      << TerminalText(o.revision) << ") to " << TerminalText(result.output_dir) << ": " << result.downloaded.size()
      << " file" << (result.downloaded.size() == 1 ? "" : "s") << " fetched, " << result.skipped.size()
      << " already complete, " << result.ignored.size() << " ignored\n";
  std::vector<std::string> present = result.downloaded;
  present.insert(present.end(), result.skipped.begin(), result.skipped.end());
  std::sort(present.begin(), present.end());
  for (const std::string& p : present) out << TerminalText(result.output_dir + "/" + p) << "\n";
}

}  // namespace

int RunDownloadCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                       HttpTransport& transport) {
  auto usage = [&](const std::string& message) {
    err << "error: tune download: " << message << "\nRun 'tune help download' for usage.\n";
    return kExitUsage;
  };
  ParsedArgs parsed;
  std::string error;
  // --ignore-patterns may be given more than once (huggingface-cli's habit); its patterns add up.
  if (!ParseArgs(args, {}, {"output-dir", "hf-token", "ignore-patterns", "revision", "repo-type"}, &parsed, &error,
                 /*repeatable=*/{"ignore-patterns"})) {
    return usage(error);
  }
  StatusOr<HubDownloadOptions> options = OptionsFromArgs(parsed);
  if (!options.ok()) return usage(options.status().message());
  HubDownloadOptions& o = *options;
  o.progress = &err;
  o.progress_is_terminal = &err == &std::cerr && isatty(STDERR_FILENO);
  if (!o.ignore_patterns.empty()) {
    out << "Ignoring files matching the following patterns: " << TerminalText(JoinStrings(o.ignore_patterns, ", "))
        << "\n";
  }
  StatusOr<HubDownloadResult> result = DownloadHubRepo(o, transport);
  if (!result.ok()) {
    err << "error: tune download: " << result.status().message() << "\n";
    return result.status().ExitCode();
  }
  PrintSummary(o, *result, out);
  return kExitOk;
}

}  // namespace tmx
