/* io/json_number.h: doubles written to JSON so that they read back as the same bits. */
#ifndef SP_JSON_NUMBER_H
#define SP_JSON_NUMBER_H

#include <cJSON.h>

/* A JSON item for v: the shortest of 15 to 17 significant digits that reads back as v, or null
 * when v is not finite. cJSON's own numbers stop at 15 digits whenever they read back within an
 * epsilon, which loses the last bits (a checkpoint's options record then disagreed with the run
 * that wrote it; a report's summary key with the array it came from). NULL when out of memory. */
cJSON *sp_json_exact_number(double v);

#endif
