/*
 * The Flink side of bench/vs_flink.py: compiled at set-up with javac against
 * <flink home>/lib/* and packaged with jar into bench/.flink/job/bench-job.jar
 * (nothing of Flink is committed).
 *
 *   BenchJob stream [name] [records/s]   a throttled unbounded source (DataGeneratorSource,
 *                                        default 4 records/s) into a discarding sink,
 *                                        checkpoints every 5 s: the long-running job
 *                                        whose recovery the failover trials time
 *   BenchJob batch [name]                ten numbers into a discarding sink in BATCH
 *                                        mode: a job that finishes at once (the
 *                                        submission trials)
 *
 * Parallelism 1, so one job takes one slot. Flink 2.x has no SourceFunction any more:
 * the source is the FLIP-27 DataGeneratorSource shipped in flink-dist.
 */
package jmbench;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

public final class BenchJob {

    /** Record i is the number i. */
    public static final class Identity implements GeneratorFunction<Long, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long map(Long value) {
            return value;
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "stream";
        String name = args.length > 1 ? args[1] : "bench-" + mode;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        if ("stream".equals(mode)) {
            double perSecond = args.length > 2 ? Double.parseDouble(args[2]) : 4.0;
            env.enableCheckpointing(5000);
            DataGeneratorSource<Long> source = new DataGeneratorSource<>(
                    new Identity(), Long.MAX_VALUE, RateLimiterStrategy.perSecond(perSecond),
                    Types.LONG);
            env.fromSource(source, WatermarkStrategy.noWatermarks(), "throttled-source")
                    .sinkTo(new DiscardingSink<>())
                    .name("discard");
        } else if ("batch".equals(mode)) {
            env.setRuntimeMode(RuntimeExecutionMode.BATCH);
            env.fromSequence(1, 10).sinkTo(new DiscardingSink<>()).name("discard");
        } else {
            throw new IllegalArgumentException("mode must be stream or batch, not " + mode);
        }
        env.execute(name);
    }
}
