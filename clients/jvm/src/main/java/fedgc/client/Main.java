package fedgc.client;

/**
 * {@code java -jar fedgc-client.jar --superlink HOST:PORT ...}: the SDK's SuperNode command
 * ({@link fedgc.supernode.Main}, every option) with fedgc's {@link FedgcHandler} as the default
 * {@code --handler}. The jar's main class.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        fedgc.supernode.Main.run(args, FedgcHandler.class.getName());
    }
}
