// recap — everything of the core in one include.
#ifndef RECAP_RECAP_H_
#define RECAP_RECAP_H_

#include "recap/codec.h"
#include "recap/conversation.h"
#include "recap/export.h"
#include "recap/log.h"
#include "recap/measure.h"
#include "recap/message.h"
#include "recap/safe_boundary.h"
#include "recap/status.h"
#include "recap/tail_reducer.h"
#include "recap/transcript.h"
#include "recap/version.h"

#endif  // RECAP_RECAP_H_
