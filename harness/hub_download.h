// `tune download`: a snapshot of a Hugging Face Hub model repo into a folder, as torchtune's `tune download`
// (huggingface_hub's snapshot_download) makes it: the repo's file list from the Hub's tree API, each file
// from its resolve URL, resumable (`<file>.incomplete` and an HTTP Range request), checked against the
// listing's sha256 (LFS) or git blob sha1 before it takes its name. HTTP goes through `HttpTransport`
// (libcurl in `MakeCurlTransport`; nothing of libcurl is in this header).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness/hub_listing.h"

namespace tmx {

// One GET. `range_from` >= 0 asks for the bytes from there on (`Range: bytes=N-`).
struct HttpRequest {
  std::string url;
  std::string bearer_token;  // "" sends no Authorization header
  int64_t range_from = -1;
  // Called about once a second while the request runs, data or not (nullptr: not called): what shows a
  // stalled transfer as stalled.
  std::function<void()> tick;
};

struct HttpResponse {
  long status = 0;                 // of the last response, after redirects
  std::string final_url;           // where redirects led
  std::vector<std::pair<std::string, std::string>> headers;  // the last response's, names lowercase
  std::string error_body;          // the start of a non-2xx response's body
  // With a transport failure: whether it may pass on a retry (the connection reset or cut short, a timeout, a
  // stall), as opposed to one that will not (no server at the address, an unknown host, a refused body).
  bool transient = false;
  std::string Header(const std::string& lowercase_name) const;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Performs `request`, following redirects. A 2xx response's body goes to `sink` as it arrives, with the
  // response's status (200 or 206); false from the sink aborts the transfer. A transport failure (no
  // connection, a transfer cut short) is a Status naming the URL; `*response` then holds what had arrived.
  virtual Status Get(const HttpRequest& request,
                     const std::function<bool(long status, const char* data, size_t n)>& sink,
                     HttpResponse* response) = 0;
};

struct CurlTransportOptions {
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;  // a transfer with no data for this long fails (transient)
};

// The libcurl transport (HTTPS, redirects, at most 256 KiB of response headers).
std::unique_ptr<HttpTransport> MakeCurlTransport(const CurlTransportOptions& options = CurlTransportOptions());

// What `tune download` is asked to do; the defaults are torchtune's.
struct HubDownloadOptions {
  std::string repo_id;  // "owner/name"
  // "model" (the default) or "dataset": where the Hub keeps the repo (/api/datasets/..., /datasets/...), and
  // where it goes by default (DownloadFolder).
  std::string repo_type = "model";
  // Where the files go. "" is torchtune's default, /tmp/<name> (the part of repo_id after the last '/').
  std::string output_dir;
  // A Hugging Face token for gated and private repos; "" sends none. Never printed.
  std::string token;
  // Files matching any of these are not downloaded. Empty (torchtune's default): everything is.
  std::vector<std::string> ignore_patterns;
  std::string revision = "main";             // a branch, tag or commit
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, as huggingface_hub reads it
  // Progress lines go here (nullptr: none); rewritten in place with '\r' only when it is a terminal.
  std::ostream* progress = nullptr;
  bool progress_is_terminal = false;
  double progress_interval_s = 0.25;  // at most this often (2 s between lines when not a terminal)
  HubListingBounds listing_bounds;    // what the repo's listing may hold (hub_listing.h)
  // A transient failure (HttpResponse::transient, or HTTP 429, 500, 502, 503, 504) is retried up to `retries`
  // times within the run, after retry_initial_s, then twice as long each time up to retry_max_s
  // (huggingface_hub's http_backoff); each retry is a line of its own, and a file resumes where it stopped.
  int retries = 5;
  double retry_initial_s = 1;
  double retry_max_s = 8;
  // A transfer with no data for this long is shown as stalled (its progress line says so, rewritten or
  // repeated at least this often while the stall lasts).
  double stall_notice_s = 10;
};

// The output folder `options` resolve to: output_dir when given, else torchtune's /tmp/<name> for a model and
// DatasetRoot()/<owner>/<name> for a dataset, the folder the dataset components read for `source: <hub id>`.
std::string DownloadFolder(const HubDownloadOptions& options);

struct HubDownloadResult {
  std::string output_dir;
  std::vector<std::string> downloaded;  // repo paths fetched (fully or resumed) in this run
  std::vector<std::string> skipped;     // already present with the right size and checksum
  std::vector<std::string> ignored;     // matched an ignore pattern
};

// Downloads the repo's files into DownloadFolder(options). Stops at the first failure with an error naming
// the file, the URL (never the token) and the fix; a partly fetched file stays only as `<file>.incomplete`,
// which the next run resumes.
StatusOr<HubDownloadResult> DownloadHubRepo(const HubDownloadOptions& options, HttpTransport& transport);

// `tune download <repo_id> [--output-dir DIR] [--hf-token TOKEN] [--ignore-patterns GLOB[,GLOB]]
// [--revision REV] [--repo-type model|dataset]`: the subcommand's body, with HF_TOKEN and HF_ENDPOINT from
// the environment. Returns the exit status.
int RunDownloadCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                       HttpTransport& transport);

}  // namespace tmx
