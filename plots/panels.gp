# ---- plots/panels.gp: one panel per quantity, one line per run ----
# The data file holds blocks_per_run blocks per run, in run order. Panel p draws, for every run,
# column panel_col[p] against column 1 of the run's block panel_block[p]; where panel_dash_col[p]
# > 0 also a dashed line of that column of block panel_dash_block[p], and where panel_band_col[p]
# > 0 a band of +- that column around the line. With has_bars, the panels are stacked with a bar
# chart right of each, from the block after every run's blocks: one row per run, the run number,
# then the value for panel p in column p + 1. The key naming every run sits below the panels.
# With n_facets > 1 (too many runs for one panel's colours, plots/series.h) each quantity is a row
# of panels, one per facet (variant) holding the runs with run_facet[i] == f, on shared axes; the
# key is a column under each facet.
px_w = 1.0 / width
px_h = 1.0 / height
# key_cols (entries per key row) and key_rows come from plots/plot.c, which grows the canvas to hold the key
faceted = n_facets > 1
stacked = has_bars || faceted
top = 1.0 - 34 * px_h
bottom = (8 + 15 * key_rows) * px_h
rows = stacked ? n_panels : 1
cols = faceted ? n_facets : has_bars ? 1 : n_panels
split = has_bars ? 0.7 : 1.0
cell_w = split / cols
cell_h = (top - bottom) / rows
bar_block = n_runs * blocks_per_run
set multiplot title figure_title font ",11"
set style fill transparent solid 0.18 noborder
unset key
do for [p = 1:n_panels] {
    b = panel_block[p]
    c = panel_col[p]
    db = panel_dash_block[p]
    dc = panel_dash_col[p]
    bc = panel_band_col[p]
    # x tics: whole steps on integer axes (block, layer, distance), about six intervals otherwise
    stats datafile index 0:(bar_block - 1) using 1:(column(1) - floor(column(1))) nooutput
    x_min = STATS_min_x
    x_max = STATS_max_x
    x_span = x_max - x_min
    x_step = x_span <= 0 ? 1 : STATS_max_y == 0 && x_span <= 12 ? 1 : nice_step(x_span, 6)
    set xtics x_step
    # long curves (losses over steps) get a marker every few points only
    rows_per_run = STATS_records / (n_runs * blocks_per_run)
    every_pt = rows_per_run > 30 ? int(rows_per_run / 12) : 1
    set xlabel panel_xlabel[p] offset 0, 0.3
    set ylabel panel_ylabel[p]
    # the runs' values (and their dashed companions): the y tics, and with facets the shared range
    # (stats leaves its variables as they were when it finds no value: start them empty)
    STATS_min = 1e300
    STATS_max = -1e300
    stats datafile index 0:(bar_block - 1) using (panel_log[p] && column(c) <= 0 ? NaN : column(c)) nooutput
    y_min = STATS_min
    y_max = STATS_max
    if (dc > 0) {
        stats datafile index 0:(bar_block - 1) using (panel_log[p] && column(dc) <= 0 ? NaN : column(dc)) nooutput
        y_min = STATS_min < y_min ? STATS_min : y_min
        y_max = STATS_max > y_max ? STATS_max : y_max
    }
    if (panel_log[p]) {
        set logscale y
        set format y logfmt
        set ytics autofreq
    } else {
        unset logscale y
        set format y "%g"
        # about four tic intervals over the runs' values: the panels can be short
        if (y_max > y_min) { set ytics nice_step(y_max - y_min, 4) } else { set ytics autofreq }
    }
    # facets share both axes (and a facet whose runs lack this quantity still draws, empty)
    if (faceted && y_max >= y_min) {
        set xrange [x_min : x_max > x_min ? x_max : x_min + 1]
        y_pad = panel_log[p] ? 0 : (y_max > y_min ? 0.05 * (y_max - y_min) : 0.5)
        if (panel_log[p]) { set yrange [y_min / 1.5 : y_max * 1.5] } else { set yrange [y_min - y_pad : y_max + y_pad] }
    }
    do for [f = 1:n_facets] {
        x0 = (faceted ? f - 1 : has_bars ? 0 : p - 1) * cell_w
        y1 = top - (stacked ? p - 1 : 0) * cell_h
        set lmargin at screen x0 + 68 * px_w
        set rmargin at screen x0 + cell_w - 14 * px_w
        set tmargin at screen y1 - 20 * px_h
        # (stacked rows leave room between a panel's x label and the title of the panel below)
        set bmargin at screen y1 - cell_h + (panel_xlabel[p] eq "" ? 22 : 40) * px_h + (stacked ? 10 : 0) * px_h
        set title (!faceted ? panel_title[p] : panel_title[p] eq "" ? facet_title[f] : facet_title[f] . ": " . panel_title[p]) \
            font ",10" offset 0, -0.4
        # a missing band or dashed line, or a run of another facet, is drawn from NaN (nothing),
        # keeping every loop non-empty
        plot for [i = 1:n_runs] datafile index ((i - 1) * blocks_per_run + b) \
                 using 1:(bc > 0 && run_facet[i] == f ? column(c) - column(bc) : NaN):(bc > 0 ? column(c) + column(bc) : NaN) \
                 with filledcurves lt run_color[i], \
             for [i = 1:n_runs] datafile index ((i - 1) * blocks_per_run + b) \
                 using 1:(run_facet[i] == f ? column(c) : NaN) with linespoints pi every_pt lt run_color[i], \
             for [i = 1:n_runs] datafile index ((i - 1) * blocks_per_run + (dc > 0 ? db : b)) \
                 using 1:(dc > 0 && run_facet[i] == f ? column(dc) : NaN) with linespoints pi every_pt dt 2 pt 6 lt run_color[i]
    }
    set autoscale xy
}
# the key: a plot of nothing in the strip below the panels, holding one entry per run (with
# facets, a column under each facet holding its runs)
set tmargin at screen bottom
set bmargin at screen 0.0
unset border
unset xtics
unset ytics
unset title
unset xlabel
unset ylabel
unset logscale y
set xrange [0 : 1]
set yrange [0 : 1]
if (faceted) {
    set key left top vertical Left reverse maxcols 1
    do for [f = 1:n_facets] {
        set lmargin at screen (f - 1) * cell_w + 8 * px_w
        set rmargin at screen f * cell_w - 8 * px_w
        plot for [i = 1:n_runs] NaN with linespoints lt run_color[i] title (run_facet[i] == f ? run_key[i] : "")
    }
} else {
    set lmargin at screen 0.02
    set rmargin at screen 0.98
    set key center center horizontal Left reverse maxcols key_cols
    plot for [i = 1:n_runs] NaN with linespoints lt run_color[i] title run_title[i]
}
unset key
set border 3
set xtics nomirror out scale 0.6
set ytics nomirror out scale 0.6
set autoscale y
if (has_bars) {
    set xtics ()
    do for [i = 1:n_runs] { set xtics add (run_short[i] i) }
    set xtics rotate by 25 right
    set xrange [0.4 : n_runs + 0.6]
    set xlabel ""
    set style fill solid 0.75 border lc rgb "#404040"
    do for [p = 1:n_panels] {
        y1 = top - (p - 1) * cell_h
        set lmargin at screen split + 60 * px_w
        set rmargin at screen 1.0 - 14 * px_w
        set tmargin at screen y1 - 20 * px_h
        set bmargin at screen y1 - cell_h + 40 * px_h
        set title "mean over blocks" font ",10" offset 0, -0.4
        set ylabel ""
        if (panel_log[p]) {
            set logscale y
            set format y logfmt
            # bars stand on the bottom of a log axis: leave room below the smallest
            stats datafile index bar_block using (column(p + 1)) nooutput
            set yrange [STATS_min / 3.0 : STATS_max * 3.0]
        } else {
            unset logscale y
            set format y "%g"
            set yrange [0 : *]
            stats datafile index bar_block using (column(p + 1)) nooutput
            if (STATS_max > 0) { set ytics nice_step(STATS_max, 3) } else { set ytics autofreq }
        }
        plot datafile index bar_block using 1:(column(p + 1)):(0.7):(run_color[int(column(1))]) \
             with boxes lc variable, \
             datafile index bar_block using 1:(column(p + 1)):(sprintf("%.3g", column(p + 1))) \
             with labels offset 0, 0.55 font ",8"
    }
}
unset multiplot
