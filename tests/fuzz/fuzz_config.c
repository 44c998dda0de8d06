/* Fuzz target: the config file parser (YAML from the user, through libyaml). */
#include <stddef.h>
#include <stdint.h>

#include "../../pkg/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_config c;
    pf_config_defaults(&c);
    (void)pf_config_parse(&c, "fuzz.yaml", (const char *)data, size);
    char digest[32];
    pf_config_digest(digest, sizeof(digest), &c);
    pf_config_free(&c);
    return 0;
}
