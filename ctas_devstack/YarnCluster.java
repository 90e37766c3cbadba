// A ResourceManager and one NodeManager in this JVM (Hadoop's MiniYARNCluster), for ctas_devstack/yarn.py.
// Run as a single-file source program: java -cp <classpath> YarnCluster.java <yarn-site.xml> <name> <memory-mb> <vcores>
// Writes the cluster's configuration to the file (renamed into place once complete) and runs until killed;
// yarn.py kills its applications first (their containers run in their own sessions).
import java.io.File;
import java.io.FileOutputStream;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class YarnCluster {
    public static void main(String[] args) throws Exception {
        YarnConfiguration conf = new YarnConfiguration();
        conf.set("yarn.scheduler.capacity.root.queues", "default");
        conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
        conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
        conf.setInt("yarn.nodemanager.resource.memory-mb", Integer.parseInt(args[2]));
        conf.setInt("yarn.nodemanager.resource.cpu-vcores", Integer.parseInt(args[3]));
        conf.setInt("yarn.scheduler.minimum-allocation-mb", 256);
        // Containers are JVMs sized by Spark, not by this machine's free memory or disk.
        conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
        conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
        conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "99.5");
        MiniYARNCluster cluster = new MiniYARNCluster(args[1], 1, 1, 1);
        cluster.init(conf);
        cluster.start();
        File target = new File(args[0]);
        File partial = new File(args[0] + ".partial");
        try (FileOutputStream out = new FileOutputStream(partial)) {
            cluster.getConfig().writeXml(out);
        }
        if (!partial.renameTo(target)) {
            throw new IllegalStateException("could not write " + target);
        }
        System.out.println("YARN ready: " + cluster.getConfig().get("yarn.resourcemanager.address"));
        Thread.currentThread().join();
    }
}
