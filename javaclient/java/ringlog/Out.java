package ringlog;

import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.common.TopicPartition;

/**
 * What the programs print for the Go tests: {@code key=value} results, one
 * event per line (words separated by spaces), and {@code step.error=...}
 * when a step threw. Lines are printed whole, from any thread.
 */
final class Out {
    private Out() {}

    /** A step of a program; a failure is printed, and the program goes on. */
    interface Step {
        void run() throws Exception;
    }

    static synchronized void put(String key, Object value) {
        System.out.println(key + "=" + value);
        System.out.flush();
    }

    static synchronized void event(Object... words) {
        StringBuilder b = new StringBuilder();
        for (Object w : words) {
            if (b.length() > 0) {
                b.append(' ');
            }
            b.append(w);
        }
        System.out.println(b);
        System.out.flush();
    }

    /**
     * Runs s; if it throws, prints name.error with the exception's class and
     * message. A step that takes half a second or more prints a slow event.
     */
    static void step(String name, Step s) {
        long start = System.nanoTime();
        try {
            s.run();
        } catch (Throwable e) {
            put(name + ".error", describe(e));
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        if (ms >= 500) {
            event("slow", name, ms, "ms");
        }
    }

    /** The class and message of what a future or a client threw, unwrapped, and its causes. */
    static String describe(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof CompletionException) && e.getCause() != null) {
            e = e.getCause();
        }
        StringBuilder b = new StringBuilder(e.getClass().getSimpleName() + ": " + e.getMessage());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            b.append("; caused by ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return b.toString().replace('\n', ' ');
    }

    /** Partitions as topic-partition names, sorted, comma-separated ("-" for none). */
    static String partitions(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) {
            return "-";
        }
        return tps.stream().map(TopicPartition::toString).sorted().collect(Collectors.joining(","));
    }

    /** Strings sorted, comma-separated ("-" for none). */
    static String sorted(Collection<String> names) {
        if (names.isEmpty()) {
            return "-";
        }
        return names.stream().sorted().collect(Collectors.joining(","));
    }

    static String ints(List<Integer> ints) {
        return ints.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    /** Waits until cond holds, or throws after timeoutMs naming what. */
    static void waitFor(String what, long timeoutMs, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(20);
        }
    }
}
