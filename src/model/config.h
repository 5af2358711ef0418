/*  config.h (internal): the model configuration read back from a checkpoint's JSON. */
#ifndef UFORM_MODEL_CONFIG_H
#define UFORM_MODEL_CONFIG_H

#include "uform/types.h"

/** Parses and checks the configuration JSON `text` (NUL-terminated); failures name `origin`. */
uform_status_t uform_config_parse(char const *origin, char const *text, uform_config_t *config);

#endif
