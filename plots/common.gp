# ---- plots/common.gp: the terminal and the styles every spanprobe figure shares ----
# Set before this: width, height (pixels), out_base (the image name without extension); fmt (png,
# pdf or svg) and out_file may be given on the command line: gnuplot -e 'fmt="pdf"' <figure>.gp
if (!exists("fmt")) fmt = "png"
if (!exists("out_file")) out_file = out_base . "." . fmt
# (nested: this gnuplot has no "else if")
if (fmt eq "png") {
    set terminal pngcairo size width, height noenhanced font "Sans,9"
} else {
    if (fmt eq "pdf") {
        # the PNG's proportions at 72 points per inch, so text and lines keep their relative size
        set terminal pdfcairo size (width / 72.0), (height / 72.0) noenhanced font "Sans,9"
    } else {
        if (fmt eq "svg") {
            set terminal svg size width, height noenhanced font "Sans,9" background rgb "white"
        } else {
            print sprintf("unknown fmt '%s' (expected png, pdf or svg)", fmt)
            exit status 2
        }
    }
}
set output out_file
set datafile missing "?"
set grid lc rgb "#e4e4e4"
set border lc rgb "#505050"
set key noautotitle spacing 1.0 samplen 2.5 font ",8" opaque
set tics nomirror out scale 0.6
set border 3
# one colour per run (its position among the inputs), the same in every figure of one plot call
set linetype 1 lc rgb "#1f77b4" lw 1.6 pt 7 ps 0.5
set linetype 2 lc rgb "#d62728" lw 1.6 pt 5 ps 0.5
set linetype 3 lc rgb "#2ca02c" lw 1.6 pt 9 ps 0.6
set linetype 4 lc rgb "#ff7f0e" lw 1.6 pt 11 ps 0.6
set linetype 5 lc rgb "#9467bd" lw 1.6 pt 13 ps 0.6
set linetype 6 lc rgb "#8c564b" lw 1.6 pt 7 ps 0.5
set linetype 7 lc rgb "#e377c2" lw 1.6 pt 5 ps 0.5
set linetype 8 lc rgb "#17becf" lw 1.6 pt 9 ps 0.6
set linetype 9 lc rgb "#7f7f7f" lw 1.6 pt 11 ps 0.6
set linetype 10 lc rgb "#bcbd22" lw 1.6 pt 13 ps 0.6
set linetype 11 lc rgb "#393b79" lw 1.6 pt 7 ps 0.5
set linetype 12 lc rgb "#ad494a" lw 1.6 pt 5 ps 0.5
# runs 13 to 24 of a panel: the same colours, hollow markers, thinner lines (plots/series.h)
set linetype 13 lc rgb "#1f77b4" lw 1.0 pt 6 ps 0.6
set linetype 14 lc rgb "#d62728" lw 1.0 pt 4 ps 0.6
set linetype 15 lc rgb "#2ca02c" lw 1.0 pt 8 ps 0.7
set linetype 16 lc rgb "#ff7f0e" lw 1.0 pt 10 ps 0.7
set linetype 17 lc rgb "#9467bd" lw 1.0 pt 12 ps 0.7
set linetype 18 lc rgb "#8c564b" lw 1.0 pt 6 ps 0.6
set linetype 19 lc rgb "#e377c2" lw 1.0 pt 4 ps 0.6
set linetype 20 lc rgb "#17becf" lw 1.0 pt 8 ps 0.7
set linetype 21 lc rgb "#7f7f7f" lw 1.0 pt 10 ps 0.7
set linetype 22 lc rgb "#bcbd22" lw 1.0 pt 12 ps 0.7
set linetype 23 lc rgb "#393b79" lw 1.0 pt 6 ps 0.6
set linetype 24 lc rgb "#ad494a" lw 1.0 pt 4 ps 0.6
set linetype cycle 24
# the colour scale of depth (per-layer curves) and of heatmaps: viridis
viridis = 'set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")'
@viridis
# log axes are labelled in powers of ten
logfmt = "1e%L"
# a round tic step (1, 2 or 5 times a power of ten) cutting range (> 0) into about n intervals
nice_step(range, n) = (ns_s = range * 1.0 / n, ns_p = 10 ** floor(log10(ns_s)), ns_m = ns_s / ns_p, \
                       (ns_m < 1.5 ? 1 : ns_m < 3.5 ? 2 : ns_m < 7.5 ? 5 : 10) * ns_p)
