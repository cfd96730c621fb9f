/* plots/gnuplot.h: running gnuplot on a figure's script. */
#ifndef SP_GNUPLOT_H
#define SP_GNUPLOT_H

#include "core/common.h"

/* Runs `gnuplot -e 'fmt="<fmt>"; out_file="<tmp>"' <script>` in dir (the script names its data
 * file relative to it), then checks the image (the format's signature at its start and its end,
 * since gnuplot exits 0 after a failed write) and renames it to dir/<base>.<fmt>. On any failure the
 * temporary image is removed and nothing appears: SP_ERR_IO when gnuplot cannot be run or its image
 * is cut short (a full disk), SP_ERR_INTERNAL with gnuplot's error line when the script fails. fmt
 * is "png", "pdf" or "svg". */
sp_status sp_gnuplot_render(const char *dir, const char *script, const char *base, const char *fmt);

#endif
