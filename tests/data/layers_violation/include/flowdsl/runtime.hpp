// stands for the runtime's public header
