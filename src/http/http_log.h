// Private: recap::http's log records go to recap's logger (log_internal.h of recap::core), so
// the host's SetLogHandler() sees them; librecap_core exports it for its components.
//
// Records carry URLs (without credentials or query), statuses, sizes and decisions — never a
// header, a key or message contents.
#ifndef RECAP_SRC_HTTP_HTTP_LOG_H_
#define RECAP_SRC_HTTP_HTTP_LOG_H_

#include "log_internal.h"
#define RECAP_HTTP_LOG_DEBUG(...) RECAP_LOG_DEBUG(__VA_ARGS__)
#define RECAP_HTTP_LOG_INFO(...) RECAP_LOG_INFO(__VA_ARGS__)
#define RECAP_HTTP_LOG_WARN(...) RECAP_LOG_WARN(__VA_ARGS__)

#endif  // RECAP_SRC_HTTP_HTTP_LOG_H_
