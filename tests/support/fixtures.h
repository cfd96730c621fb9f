/* tests/support/fixtures.h: the fixture files fixtures/build.sh makes with the tool itself in
 * $BUILD_DIR/fixtures (tiny.h5: `spanprobe init --config fixtures/tiny.json --seed 1`). */
#ifndef SP_TEST_FIXTURES_H
#define SP_TEST_FIXTURES_H

#include <stddef.h>

/* Writes "$BUILD_DIR/fixtures/<name>" into buf, running fixtures/build.sh first when the file is
 * missing. Returns 1 when the file exists, 0 when it cannot be made (SPANPROBE_BIN or BUILD_DIR
 * unset, or the build failed): the caller skips. */
int fixture_file(const char *name, char *buf, size_t len);

#endif
