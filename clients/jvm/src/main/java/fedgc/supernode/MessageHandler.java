package fedgc.supernode;

/**
 * The application: one instruction message in, its reply out (what a ClientApp is to a Python
 * SuperNode). Build the reply with {@link Message#reply} (or {@link Message#errorReply}); throwing
 * sends Flower's error reply ({@code CLIENT_APP_RAISED_EXCEPTION}) instead.
 */
public interface MessageHandler {
    Message handle(Message message, NodeContext context) throws Exception;
}
