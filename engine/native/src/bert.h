// bert.h: the BERT pre-training family (bert.cpp), registered in families.cpp.
#pragma once

#include "model.h"

namespace cs {

// BERT with the MLM and NSP heads (Hugging Face BertForPreTraining); presets
// "tiny", "base" and "large".
Family bert_family();

}  // namespace cs
