/* tests/support/json_file.h: a JSON file of the fixtures, parsed; fails the test when it cannot be
 * read or parsed. */
#ifndef SP_TEST_JSON_FILE_H
#define SP_TEST_JSON_FILE_H

#include <cJSON.h>

/* The parsed document (cJSON_Delete). */
cJSON *json_file_read(const char *path);

#endif
