package fedgc.supernode;

import java.io.File;
import java.util.Collections;
import java.util.Map;

/** What a handler knows besides the message: this node (id, config, data folder) and the run. */
public final class NodeContext {
    public final long nodeId;
    public final long runId;
    /** The run's {@code override_config} (from GetRun; the FAB's defaults are not read by this client). */
    public final Map<String, Object> runOverrideConfig;
    /** {@code --node-config} (e.g. partition-id): Long, Double, Boolean or String values. */
    public final Map<String, Object> nodeConfig;
    /** {@code --data-dir}, or null. */
    public final File dataDir;

    public NodeContext(long nodeId, long runId, Map<String, Object> nodeConfig, Map<String, Object> runOverrideConfig,
                File dataDir) {
        this.nodeConfig = Collections.unmodifiableMap(nodeConfig);
        this.nodeId = nodeId;
        this.runId = runId;
        this.runOverrideConfig = Collections.unmodifiableMap(runOverrideConfig);
        this.dataDir = dataDir;
    }
}
