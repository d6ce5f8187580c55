/// @file
/// recap — everything of the core in one include.
#ifndef RECAP_RECAP_H_
#define RECAP_RECAP_H_

#include "recap/cancellation.h"
#include "recap/checkpoint.h"
#include "recap/codec.h"
#include "recap/compactor.h"
#include "recap/config.h"
#include "recap/conversation.h"
#include "recap/events.h"
#include "recap/export.h"
#include "recap/ledger.h"
#include "recap/log.h"
#include "recap/measure.h"
#include "recap/memory_plugin.h"
#include "recap/message.h"
#include "recap/offline_summarizer.h"
#include "recap/plugin_hook.h"
#include "recap/provider.h"
#include "recap/recall.h"
#include "recap/safe_boundary.h"
#include "recap/session_store.h"
#include "recap/status.h"
#include "recap/tail_reducer.h"
#include "recap/time_source.h"
#include "recap/transcript.h"
#include "recap/version.h"

#endif  // RECAP_RECAP_H_
