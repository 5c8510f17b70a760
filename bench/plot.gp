# plot.gp: bench/compare's figure. Called with the variables throughput,
# latency (data files written by bench/compare) and output (the PNG).
#   throughput: "label" submit_acks_per_s e2e_jobs_per_s ("-": not measured)
#   latency:    "label" p50_ms p99_ms p99.9_ms   (at the offered rate in the
#               label: 200/s on one connection, or half the e2e rate)
set terminal pngcairo size 1600,600 font "sans,10"
set output output
set multiplot layout 1,2 title "berth vs beanstalkd and graphile-worker: 8 producer connections, one round trip per job unless pipelined"

set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top right
set xtics rotate by -30 left

set datafile missing "-"
# A log scale: the rows span graphile-worker's hundreds to acknowledgements'
# tens of thousands a second.
set title "Throughput (jobs/s, log)"
set ylabel "jobs per second"
set logscale y
set yrange [10:100000]
plot throughput using 2:xtic(1) title "submit acks/s", \
     '' using 3 title "end to end (completed)/s"

set title "Submitted to completed, open loop at 200/s and at half the e2e rate (ms, log)"
set ylabel "milliseconds"
set logscale y
set yrange [0.01:100000]
set key top left
plot latency using 2:xtic(1) title "p50", \
     '' using 3 title "p99", \
     '' using 4 title "p99.9"
unset multiplot
