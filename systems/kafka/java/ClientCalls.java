package undertow.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The queue client's hot calls, each one crossing from Python (systems/kafka/java/calls.py).
 * JPype's cost is per call and per Java object handed back, not per byte: a send waited
 * for, a poll's records as one long[] and an assignment with its positions cost what one
 * call does, where the same done from Python cost a call per record field.
 */
public final class ClientCalls {
    private ClientCalls() {}

    /** One record sent to `partition` (no key) and waited for: its offset, -1 for none. */
    public static long send(Producer<String, String> producer, String topic, int partition,
                            String value) throws InterruptedException, ExecutionException {
        RecordMetadata meta =
                producer.send(new ProducerRecord<>(topic, partition, null, value)).get();
        return meta.hasOffset() ? meta.offset() : -1L;
    }

    /**
     * A poll's records as (partition, offset, value) triples; a value that is not a decimal
     * number throws NumberFormatException.
     */
    public static long[] flatten(ConsumerRecords<?, ?> records) {
        long[] out = new long[records.count() * 3];
        int i = 0;
        for (ConsumerRecord<?, ?> r : records) {
            out[i++] = r.partition();
            out[i++] = r.offset();
            out[i++] = Long.parseLong(String.valueOf(r.value()));
        }
        return out;
    }

    /** The topic's `partitions` assigned, each at its position, or its beginning where < 0. */
    public static void assign(Consumer<?, ?> consumer, String topic, int[] partitions,
                              long[] positions) {
        List<TopicPartition> tps = new ArrayList<>(partitions.length);
        for (int p : partitions) {
            tps.add(new TopicPartition(topic, p));
        }
        consumer.assign(tps);
        for (int i = 0; i < partitions.length; i++) {
            if (positions[i] >= 0) {
                consumer.seek(tps.get(i), positions[i]);
            } else {
                consumer.seekToBeginning(Collections.singletonList(tps.get(i)));
            }
        }
    }

    /** A poll of at most `waitMs`. */
    public static ConsumerRecords<?, ?> poll(Consumer<?, ?> consumer, long waitMs) {
        return consumer.poll(Duration.ofMillis(waitMs));
    }
}
